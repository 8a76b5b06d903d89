"""``--set mcp_redact=true``: the flow file gets a redacted copy of each flow; the traffic, never touched.

mitmproxy's ``-w`` (the ``save`` addon, ``save_stream_file``) writes a flow from its ``response``,
``error`` and ``websocket_end`` hooks and, at shutdown, the flows still open, each through
``FilteredFlowWriter.add(flow)``, which serializes ``flow.get_state()``. On a ``response`` hook the answer
of a plain (not streamed) response has not yet been sent to the client, so changing the live flow there
would change what the client receives. Nothing here changes the live flow: the writer that ``save`` opens
(at start-up, on a changed option, on each new strftime file name) is replaced by :class:`RedactingWriter`,
which serializes a *copy* made from the flow's state (``HTTPFlow.from_state(flow.get_state())``: new
objects, no reference into the live flow) and redacted by ``analyzer/redaction/sanitize.py`` with one run's
pseudonyms (``analyzer/redaction/redact.py``). The addon's own writer (``mcp_write``, addon/rotation.py) gets the same
copy. What mitmweb shows and what goes over the wire stay as they were.

A writer this does not know cannot be redacted, so ``mcp_redact`` refuses to start beside one that would
write secrets: ``hardump`` (mitmproxy's HAR at exit). If ``save``'s internals change so that the writer
cannot be replaced, start-up fails too: the option asked for no secrets on disk, and recording them
anyway would be worse than not starting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mitmproxy import ctx, exceptions, flowfilter, http
from mitmproxy import flow as mflow
from mitmproxy.io import FilteredFlowWriter, tnetstring

from mcp_blackbox.analyzer.redaction.sanitize import Sanitizer

logger = logging.getLogger("mcp_blackbox")

ORIGINAL_ROTATE = "_mcp_blackbox_rotate"  # save's own method, kept on the instance when it is wrapped
ORIGINAL_SAVE = "_mcp_blackbox_save"


class RedactingWriter(FilteredFlowWriter):
    """``save``'s writer, writing each flow's redacted copy (and no flow that is not HTTP)."""

    def __init__(self, fo: Any, flt: flowfilter.TFilter | None, redaction: RecordRedaction) -> None:
        super().__init__(fo, flt)
        self.redaction = redaction

    def add(self, f: mflow.Flow) -> None:
        if self.flt and not flowfilter.match(self.flt, f):
            return
        copy = self.redaction.for_disk(f)
        if copy is not None:
            tnetstring.dump(copy.get_state(), self.fo)
            self.fo.flush()


class RecordRedaction:
    """Puts the redacting writer in place of the writers of ``save`` and of the addon's ``CaptureWriter``."""

    def __init__(self) -> None:
        self.enabled = False
        self.sanitizer = Sanitizer()
        self.skipped_not_http = 0
        self.failed = 0

    def configure(self, enabled: bool) -> None:
        if not enabled and not self.enabled:
            return  # never on: nothing of mitmproxy's is touched
        if enabled and getattr(ctx.options, "hardump", None):
            raise exceptions.OptionsError(
                "mcp_redact: hardump writes a HAR of every flow with its secrets; mcp_redact redacts the flow "
                "file only (-w or mcp_write). Drop hardump, or make a HAR from the redacted capture afterwards."
            )
        self.enabled = enabled
        self.install()

    def install(self) -> None:
        """Wrap or unwrap the writers of this process; idempotent (a reloaded script installs its own)."""
        addons = ctx.master.addons
        save = addons.get("save")
        if save is not None:
            self._wrap_save(save)
        elif self.enabled and getattr(ctx.options, "save_stream_file", None):
            raise exceptions.OptionsError("mcp_redact: mitmproxy's save addon is not there to redact -w")
        writer = addons.get("capturewriter")
        if writer is not None:
            self._wrap_capture_writer(writer)

    def for_disk(self, f: mflow.Flow) -> http.HTTPFlow | None:
        """The copy of ``f`` to write: redacted, or None (not HTTP, or redaction failed: not written)."""
        if not isinstance(f, http.HTTPFlow):
            self.skipped_not_http += 1
            if self.skipped_not_http == 1:
                logger.warning("mcp_blackbox: mcp_redact writes HTTP flows only; a %s flow was not written", f.type)
            return None
        try:
            return self.sanitizer.copy(f)
        except Exception:
            self.failed += 1
            logger.exception("mcp_blackbox: redacting flow %s failed; it is NOT written (traffic unaffected)", f.id)
            return None

    # ---------------------------------------------------------------- mitmproxy's save addon (-w)

    def _wrap_save(self, save: Any) -> None:
        rotate = getattr(save, ORIGINAL_ROTATE, None) or getattr(save, "maybe_rotate_to_new_file", None)
        if rotate is None or not hasattr(save, "stream"):
            if self.enabled:
                raise exceptions.OptionsError("mcp_redact: this mitmproxy's save addon cannot be redacted")
            return
        setattr(save, ORIGINAL_ROTATE, rotate)
        if not self.enabled:
            if "maybe_rotate_to_new_file" in vars(save):
                del save.maybe_rotate_to_new_file  # save's own method again
            if isinstance(save.stream, RedactingWriter):
                save.stream = FilteredFlowWriter(save.stream.fo, save.stream.flt)
            return

        def rotate_then_redact() -> None:
            rotate()
            self._redact_stream(save)

        save.maybe_rotate_to_new_file = rotate_then_redact
        self._redact_stream(save)

    def _redact_stream(self, save: Any) -> None:
        stream = save.stream
        if stream is not None and (not isinstance(stream, RedactingWriter) or stream.redaction is not self):
            save.stream = RedactingWriter(stream.fo, stream.flt, self)

    # ---------------------------------------------------------------- the addon's writer (mcp_write)

    def _wrap_capture_writer(self, writer: Any) -> None:
        save: Callable[[http.HTTPFlow], None] | None = getattr(writer, ORIGINAL_SAVE, None) or getattr(
            writer, "_save", None
        )
        if save is None:
            if self.enabled:
                raise exceptions.OptionsError("mcp_redact: the addon's capture writer cannot be redacted")
            return
        setattr(writer, ORIGINAL_SAVE, save)
        if not self.enabled:
            if "_save" in vars(writer):
                del writer._save
            return

        def save_redacted(flow: http.HTTPFlow) -> None:
            if getattr(writer, "files", True) is None:  # writing nowhere (no mcp_write): nothing to redact
                save(flow)
                return
            copy = self.for_disk(flow)
            if copy is not None:
                save(copy)  # the same id: the writer forgets the live flow as written
            else:
                getattr(writer, "open_flows", {}).pop(flow.id, None)

        writer._save = save_redacted
