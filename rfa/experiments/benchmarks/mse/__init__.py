"""Speed of the MSE runner: the full ``performer_fig2`` sweep from an empty workdir, timed end to end.

Run: ``rfa benchmark mse`` (``make benchmark``). The sweep is 73 angles x 20
lengths x {trig, positive}, m = 64, d = 16, 10^4 Monte Carlo repetitions per point; the target is
under 60 s on a 2-core CPU. Prints the wall time (compilation, closed forms, figures and report
included) and the feature evaluations per second (scalar φ_i(x) values computed, for x and y), and
writes them as JSON.
"""
