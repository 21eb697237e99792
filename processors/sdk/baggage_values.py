"""Reading W3C baggage entries the way users wrote them.

The SDK's ``W3CBaggagePropagator`` (checked on 1.45) percent-decodes an entry's whole value,
properties included, and stores it in the context: ``tenant_id=staging%2Deu;ttl=60`` arrives as
``"staging-eu;ttl=60"``. Policies and attributes want the value alone, so everything from the first
``;`` on is dropped. The propagator has already decoded percent escapes; decoding again would turn a
literal ``%41`` in a value into ``A``, so it is not done here. One ambiguity remains upstream: a value
that itself contains an encoded ``;`` (``%3B``) is cut there too, because the decoded text no longer
shows which ``;`` was data.
"""


def entry_value(raw: object) -> str:
    """The value of one baggage entry without its W3C properties.

    ``"debug-high"`` -> ``"debug-high"``; ``"v;prop=1"`` -> ``"v"``; ``"v ; p"`` -> ``"v"`` (the
    optional whitespace before ``;``). A value without properties is returned as is: the propagator
    has already trimmed it. Non-string values (set by application code) are converted with ``str``.
    Pure and thread-safe.
    """
    text = raw if isinstance(raw, str) else str(raw)
    cut = text.find(";")
    return text if cut < 0 else text[:cut].rstrip(" \t")
