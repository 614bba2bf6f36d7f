"""Issues: failures grouped the way an operator thinks (dead events, failed outbox deliveries,
failed reconciliation runs, open discrepancies of one cause), by source, type and a normalised
error signature, with a status an operator moves: open -> acknowledged -> resolved."""
