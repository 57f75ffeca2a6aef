"""Strata's storage core: partition logs of segments, record batches, indexes, recovery.

Owns everything on disk under a broker's ``log.dirs``. Pure file work: no sockets, no asyncio.
The broker drives it from its event loop for appends and reads (which only touch the OS page
cache) and from worker threads for fsync, retention and cleaning.
"""
