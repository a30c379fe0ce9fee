"""Running one test body in several threads at once, with every failure reported.

`run_in_threads(work, count)` calls ``work(i)`` for ``i in range(count)``, each in a thread of its
own, all started before any is joined, and returns what they raised (an empty list when all
passed). Used by the thread tests of the guards, the hook and dynamic shapes.
"""

from __future__ import annotations

import threading
from typing import Callable


def run_in_threads(work: Callable[[int], None], count: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
