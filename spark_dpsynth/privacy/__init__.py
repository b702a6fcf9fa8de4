"""Privacy primitives: the only code that draws privacy noise or converts between privacy budgets.

* :mod:`.noise`: sources of exact discrete noise (OpenDP over the OS's cryptographic source in production).
* :mod:`._seeded`: test mode's seeded, NOT private generators (the one exception to the privacy lint).
* :mod:`.budget`: :class:`~.budget.Budget`, the release's one budget value (epsilon, delta, accounting, seed).
* :mod:`.accounting`: the :class:`~.accounting.Accountant` (the ledger: a release's budget in named shares, and the
  only caller of a noise source: every draw is made through a spent share, at its scale); epsilon/delta <-> rho
  (zCDP) conversions, thresholds. The marginals mechanism's split of a budget is
  :mod:`spark_dpsynth.mechanisms.budget_split`.
* :mod:`.ledger`: the ledger's record, :class:`~.ledger.Ledger` of :class:`~.ledger.BudgetShare` (the release
  manifest's ``budget``); the release imports it, privacy imports nothing of the release.
"""
