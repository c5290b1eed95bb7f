"""NormLab (归一化实验室): the helper package of the course.

Import modules explicitly, e.g. ``from normlab import norms``. Four layers, each importing only the
ones below it, core < cost < course < wings, and each only those its rule in
tests/test_architecture.py (MAY_IMPORT) lists; that test walks the imports and enforces it:

Core — what a learner reads next to the lessons; each file stands on its own:
    norms       reference BatchNorm / LayerNorm / RMSNorm / GroupNorm / InstanceNorm (= torch.nn)
    variants    every norm formula as a pure function, written once: the forms real models use
                (LLaMA, T5, Gemma, pRMSNorm ...) and the wrong forms the source material writes
    init        DeepNet's alpha / beta and the one weight init (Xavier, GPT-2's 1/sqrt(2N), DeepNet's beta)
    blocks      residual blocks whose wiring is a parameter (plain / post / pre / sandwich / deepnorm)
    models      DigitsNet (digits classifier) and SequenceModel (tokens -> per-position logits)
    data        digits() (scikit-learn's load_digits, shipped inside the package) and synthetic sequence tasks
    train       the one training loop (progress bar; update:data ratios, model updates, warm-up)
    probes      per-layer activation / gradient / update:data probes (hooks removed afterwards)
    viz         Chinese-capable plot style and small tables
    record      expect(): a checked claim on a measured number, recorded by the seed x thread sweep
  and three helpers the core layer itself needs, so they stay on its floor:
    env         normlab.setup() / seed() (seed from NORMLAB_SEED) that every lesson calls, environment report
    runcache    the test run only: a learner copy replays the trainings its solution copy just made
                (train.py and env.py import it)
    console     console_safe(): a command line's report prints on any console (✓ -> [OK] on GBK); no torch.
                The cost layer's bench imports it, so it cannot live in the course layer above cost
Cost:
    bench       what a norm costs (micro-benchmarks: python -m normlab.bench)
    fused       Add + RMSNorm as one Triton kernel (optional extra; its kernel is fused_kernel.py)
Course (course/, the course machinery; imports core only; the core and cost never import it):
    course      export (solution / learner copies, the setup cell), normlab-course init / reset
                (python -m normlab.course); answer_key, workspace, private (a learner's files, owner-only),
                predictions + predictions_data (the 先想一想 prompts and guesses), kernelmeta
Wings (import core and cost; widgets/ and classroom/ the course layer too; never each other sideways):
    lessons/    one module per lesson's experiments: residuals (01), batchnorm + sync_bn (02),
                layernorm + invariance (03, 04), deepnorm (05), placement + warmup (06), beyond (07)
    widgets/    the axes explorer (02, 03), the gradient-flow widget (01, 06) and the prompt widget
                (predict.py: imports normlab.course.predictions, a layer below)
    companion/  the source-material companion (09): errata as data beside their demos, the concordance
    exercises/  each lesson's 练习 checkers (exercises.check("02.1", answer)); imports core, lessons and
                drills' report only; nothing imports it
    drills/     the interview-drill checker (python -m normlab.drills KIND FILE.py); imports nothing else
    classroom/  the class service on a JupyterHub (live prediction polls, the teacher's view) and the
                kernel's client; imports core and course only, nothing imports it (events reach it
                through logging)
"""

__version__ = "0.1.0"
_FROM_ENV = ("report", "seed", "seed_all", "setup")


def __getattr__(name: str):
    """normlab.setup, normlab.seed, ... come from normlab.env, imported on first use (PEP 562): so
    ``import normlab.drills`` or ``python -m normlab.course`` does not pay for torch and matplotlib."""
    if name in _FROM_ENV:
        from . import env
        return getattr(env, name)
    raise AttributeError(f"module 'normlab' has no attribute {name!r}")
__all__ = ["setup", "seed", "seed_all", "report", "__version__"]
