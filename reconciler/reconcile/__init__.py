"""Reconciliation: compare what each source says happened with the inbox and the business tables."""
