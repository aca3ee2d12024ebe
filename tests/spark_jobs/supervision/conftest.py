"""Every supervision test checks that it leaves no process behind; this tells it which processes were there before."""

import pytest

from tests.helpers.processes import remember_processes_before_the_test


@pytest.fixture(autouse=True)
def _processes_before_the_test():
    remember_processes_before_the_test()
