from dpnc.privacy import (
    Accountant,
    DiscreteGaussian,
    ExponentialMechanism,
    FixedSize,
    Gaussian,
    Sampled,
    TreeAggregated,
    ZCDPMechanism,
)


def mixed_ledger(relation: str = "replace-one") -> Accountant:
    """An accountant holding one of every kind of release (the same ledger in every test that needs
    one)."""
    acct = Accountant(relation)
    acct.record(Gaussian(0.2, 1.0), 7)
    acct.record(Sampled(FixedSize(1000, 64), Gaussian(0.2, 1.0)), 3)
    acct.record(TreeAggregated(Gaussian(0.5, 2.0), leaves=16))
    acct.record(ZCDPMechanism(0.01))
    acct.record(DiscreteGaussian(101, 400.0), 2)
    acct.record(ExponentialMechanism(0.3))
    return acct
