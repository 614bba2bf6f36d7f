"""The states and kinds hookledger stores (short strings in the database): a module of their own
so that pure code (the judge, the CLI's parsing) names them without importing SQLAlchemy."""

from __future__ import annotations

import enum


class EventStatus(enum.StrEnum):
    PENDING = "pending"
    PROCESSING = "processing"
    PROCESSED = "processed"
    FAILED = "failed"  # last attempt failed, a retry is scheduled at next_attempt_at
    DEAD = "dead"
    IGNORED = "ignored"  # no handler and no forward target: nothing to do


class EventOrigin(enum.StrEnum):
    WEBHOOK = "webhook"
    BACKFILL = "backfill"
    REPLAY = "replay"


class DeliveryOutcome(enum.StrEnum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    CONFLICT = "conflict"  # a stored event id with other content: logged, flagged, not applied


class ErrorClass(enum.StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    # the request may or may not have taken effect (sent, no answer): ask the handler's verify
    # function before running it again
    AMBIGUOUS = "ambiguous"


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"


class DiscrepancyKind(enum.StrEnum):
    MISSING = "missing"
    DUPLICATE = "duplicate"
    DIVERGED = "diverged"
    UNAPPLIED = "unapplied"
    ORPHANED = "orphaned"
    STUCK = "stuck"
    DEAD = "dead"
    CONFLICT = "conflict"  # a redelivery's content differs from the stored event's, per field


class DiscrepancyStatus(enum.StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"
    IGNORED = "ignored"
