"""Interview drills (手撕): check a hand-written norm and name the mistake. (being written)"""
