"""One module per instrumentation library; each has ``LIBRARIES`` (distributions whose versions go into the
truth file) and ``run(run: DriverRun) -> None`` (instrument, then run ``run.options.requests`` requests)."""
