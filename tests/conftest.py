"""Suite-wide reporting."""


def pytest_terminal_summary(terminalreporter, config):
    # pytest-randomly prints its seed in the header, which -q hides; an
    # order-dependent failure needs the seed to be repeated.
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.has_plugin("randomly"):
        terminalreporter.write_line(f"random test order: --randomly-seed={seed} repeats it")
