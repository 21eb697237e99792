"""Operator scripts run from a checkout (``python -m tools.<name>`` at the repository root), never installed with
the server: they drive Hotspan and the instrumented stack from outside, as a person at a GPU machine would."""
