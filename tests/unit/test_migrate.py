"""The schema revision a command expects is the migrations directory's head."""

from reconciler.storage.migrate import HEAD_REVISION, migrations_head


def test_the_expected_revision_is_the_newest_migration() -> None:
    # a new migration that does not move HEAD_REVISION would make every command refuse a database
    # that `hookledger init` had just brought up to date
    assert migrations_head() == HEAD_REVISION
