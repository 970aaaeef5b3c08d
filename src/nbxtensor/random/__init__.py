"""``nbxtensor.random``: seeded counter-based random streams (Philox4x32-10) identical on CPU and GPU, the
distributions built on them, and token sampling for generation.

- :mod:`.philox`: the generator function, in NumPy and in Triton, and the stream layout;
- :mod:`.detmath`: float64 log/exp/sincos with the same bits on both devices;
- :mod:`.generator`: ``Generator``, ``manual_seed`` and the default generators;
- :mod:`.distributions`: ``rand``, ``randn``, ``randint``, ``randperm``, ``bernoulli``, ``multinomial``,
  ``uniform_``, ``normal_``, ``bernoulli_``, ``dropout``;
- :mod:`.sampling`: ``sample`` (greedy, temperature, top-k, top-p, min-p, repetition penalty) and its float64
  reference.
"""

from .generator import (Generator, default_generator, default_generator_for, get_rng_state, initial_seed,
                        manual_seed, seed, set_rng_state)
from .distributions import (bernoulli, bernoulli_, dropout, multinomial, normal_, rand, rand_like, randint,
                            randint_like, randn, randn_like, randperm, uniform_)
from .sampling import sample, sample_reference, sampling_mask

__all__ = ["Generator", "default_generator", "default_generator_for", "get_rng_state", "initial_seed",
           "manual_seed", "seed", "set_rng_state", "bernoulli", "bernoulli_", "dropout", "multinomial", "normal_",
           "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "randperm", "uniform_",
           "sample", "sample_reference", "sampling_mask"]
