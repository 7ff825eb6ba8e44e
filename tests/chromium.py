"""One headless Chromium per test process, shared by its browser tests (the `browser` fixture in
tests/conftest.py). Starting Playwright's driver and Chromium cost each browser test seconds of
CPU; a test now gets the running browser, and its pages stay its own: every context a test
opened (each `new_page` is a context of its own, with its own cookies and storage) is closed
when it ends, so the next test starts with none.

Playwright's sync API runs its event loop in a greenlet of this thread and marks the loop as
running while a browser call may be in flight. Between browser tests the mark is lifted, so a
test without a browser sees no running loop here (`asyncio.run` works, Django's async-safety
check holds), and it is put back before the browser is used again."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any


class SharedChromium:
    def __init__(self, *, executable: str, args: Sequence[str]) -> None:
        self.executable = executable
        self.args = list(args)
        self.playwright: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.browser: Any = None

    def take(self) -> Any:
        """The browser, started on first use (or again, should it have gone away), with
        Playwright's loop marked running on this thread for the test."""
        if self.playwright is None:
            from playwright.sync_api import sync_playwright

            self.playwright = sync_playwright().start()
            self.loop = asyncio.get_running_loop()
        else:
            asyncio._set_running_loop(self.loop)
        if self.browser is None or not self.browser.is_connected():
            self.browser = self.playwright.chromium.launch(
                executable_path=self.executable, args=self.args
            )
        return self.browser

    def give_back(self) -> None:
        """Close what the test opened and lift the running loop's mark. Should that fail (a
        test that broke the browser or the driver), all of it goes, and the next test starts
        afresh."""
        try:
            if self.browser is not None and self.browser.is_connected():
                for context in self.browser.contexts:
                    context.close()
        except Exception:
            self.close()
        finally:
            asyncio._set_running_loop(None)

    def close(self) -> None:
        if self.playwright is None:
            return
        asyncio._set_running_loop(self.loop)
        try:
            if self.browser is not None and self.browser.is_connected():
                self.browser.close()
        finally:
            self.browser = None
            try:
                self.playwright.stop()
            finally:
                self.playwright = None
                asyncio._set_running_loop(None)
