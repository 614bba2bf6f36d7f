"""``hookledger demo``: the whole system on a realistic day of sandbox traffic (see ``run``)."""
