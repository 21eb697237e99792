"""One module per instrumentation library; each has ``LIBRARIES`` (distributions whose versions go into the
truth file) and ``run(run: DriverRun) -> None`` (instrument, then run ``run.options.requests`` requests); those
that run the hand-written chat loop set ``APP_SETTINGS = True`` (they honour ``DriverOptions.app``); one whose
library cannot have HTTP client spans sets ``HTTP_SPANS = False`` (it runs with them off)."""
