"""What the Perfetto timeline file (``timeline.pftrace``) shows: its span under the event limit (:mod:`.span`) and
the rows, idle pieces, markers and counters inside it (:mod:`.content`); the encoder is :mod:`render.perfetto`."""
