"""Progress of a Tune, which streams one message per problem measured.

``progress=True`` shows a bar on stderr once tuning has run for a second (short
tunings stay quiet): tqdm's when it is installed, else one line per problem.
``progress=False`` shows nothing; a callable is called with each TuneOutcome.
"""

import sys
import time

DELAY_SECONDS = 1.0


def _describe(outcome):
    m, n, k, dtype = outcome.problem
    what = "%s %dx%dx%d" % (dtype, m, n, k)
    if outcome.error:
        return "%s: failed: %s" % (what, outcome.error)
    return "%s: %s" % (what, outcome.verdict.winner if outcome.verdict else "done")


class TuneDisplay:
    """Shows each TuneOutcome as it arrives. close() when the stream ends."""

    def __init__(self, total, progress, stream=None, delay=DELAY_SECONDS, use_tqdm=True):
        self._callback = progress if callable(progress) else None
        self._enabled = progress is True
        self._stream = stream if stream is not None else sys.stderr
        self._delay = delay
        self._start = time.monotonic()
        self._bar = None
        self._total = total
        if self._enabled and use_tqdm:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, desc="tune", unit="shape", file=self._stream, delay=delay)

    def update(self, outcome):
        if self._callback is not None:
            self._callback(outcome)
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(_describe(outcome), refresh=False)
            self._bar.update(1)
        elif time.monotonic() - self._start >= self._delay:
            self._stream.write("tune [%d/%d] %s\n" % (outcome.index + 1, outcome.total, _describe(outcome)))
            self._stream.flush()

    def close(self):
        if self._bar is not None:
            self._bar.close()
