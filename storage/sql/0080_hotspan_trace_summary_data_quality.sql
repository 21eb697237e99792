-- What each request's window rests on (analysis.request_window.request_quality, issue 27), so the Stages page can
-- say how many of a window's requests were repaired, and how: Enveloped, the window is the envelope of the spans
-- (the root missing or never ended); ParentlessSpans, the spans the trace held without a parent in it (1 for a
-- whole trace, more when orphans or second roots were attached to the root; 0 only in rows written before this
-- migration, which carry no data quality until the trace is analysed again); ReattachedSpans, spans analysed under
-- another parent than they name; OutlivingSpans, work kept whole that outlived the span that started it or started
-- after it returned; ExtendedSpans, spans analysed as ending later to hold such work; ExtendedNs, how far the
-- window runs past the root's own end for it (ns); ImplausibleRoot, a root far longer than everything under it.
ALTER TABLE hotspan_trace_summary
    ADD COLUMN IF NOT EXISTS Enveloped Bool DEFAULT false,
    ADD COLUMN IF NOT EXISTS ParentlessSpans UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ReattachedSpans UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS OutlivingSpans UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ExtendedSpans UInt32 DEFAULT 0,
    ADD COLUMN IF NOT EXISTS ExtendedNs UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS ImplausibleRoot Bool DEFAULT false
