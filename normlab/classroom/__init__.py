"""The class service (issue 39): the class sees its own guesses, the teacher sees where each learner stands.

A wing: it imports the core and the course layer below it (normlab.course.predictions: the prompts and
their options); nothing imports it.

    service.py    the hub-managed JupyterHub service (tornado; HubOAuth for browsers, tokens for kernels)
    store.py      its storage: one SQLite file in WAL mode, events appended, never updated
    events.py     what a learner may post, checked before anything is stored (400 otherwise)
    client.py     the kernel's side: posts what normlab.events logs (guesses, exercise checks, drill reports)
    startup.py    PYTHONSTARTUP of a learner's kernel under the hub: installs the client
    hubconfig.py  the hub's configuration for it (the test hub, TLJH, Z2JH)
    web/          the teacher's dashboard, the learner's page and classroom.js (slides and JupyterLab)

The instructor guide (book/instructor.md, "课堂投票") says how to run a poll in a lecture.
"""
