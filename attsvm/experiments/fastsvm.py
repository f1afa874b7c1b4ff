"""The batched exact SVMs now live in `attsvm.fastsvm` (the pages' studies use them too);
this name remains for experiment modules that still import them from here."""
from ..fastsvm import ldp, least_norm_fro, solve_many  # noqa: F401
