"""The transaction coordinator: transactional ids, their state in ``__transaction_state``, markers.

Pure code (no I/O, no asyncio, time passed in as ``now_ms``); the broker's shell performs the
log appends and the WriteTxnMarkers requests these modules decide (DESIGN.md, "Transactions").
"""
