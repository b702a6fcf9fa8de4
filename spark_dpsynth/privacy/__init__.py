"""Privacy primitives: the only code that draws privacy noise or converts between privacy budgets.

* :mod:`.noise`: sources of exact discrete noise (OpenDP over the OS's cryptographic source in production).
* :mod:`._seeded`: test mode's seeded, NOT private generators (the one exception to the privacy lint).
* :mod:`.accounting`: the :class:`~.accounting.Accountant` (the ledger: a release's budget in named shares, and the
  only caller of a noise source: every draw is made through a spent share, at its scale); epsilon/delta <-> rho
  (zCDP) conversions, the budget split of a release, thresholds.
"""
