"""The OTel-instrumented agent stack, a vLLM emulator, workload replay and fault injection.

See ``instrumented_stack/README.md`` for the services, the trace shape, the modules and the fault table.
Entry points: :func:`instrumented_stack.runner.run_stack` (what ``hotspan demo`` calls),
:func:`instrumented_stack.replay.run_workload` (``hotspan stack run``).
"""
