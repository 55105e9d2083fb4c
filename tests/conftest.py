"""Suite-wide test configuration: hypothesis profiles.

``ci`` (chosen when the CI environment variable is set) runs more examples with no
per-example deadline, since CI shares a noisy 2-core machine; ``dev`` is the quick
default. ``HYPOTHESIS_PROFILE`` overrides either.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
