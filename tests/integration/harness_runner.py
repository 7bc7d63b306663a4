"""The runner of the integration tests: unittest's discovery and fixtures,
with the output ctest's logs have always shown. Each test file ends with

    if __name__ == "__main__":
        h.main()

and main() runs the unittest.TestCase classes of that file in the order they
are written (not unittest's alphabetical order: a file reads top to bottom,
and its shared daemon sees the tests in that order), printing one line per
test, `PASS name (N s)` or `FAIL name (N s): reason`, then `N passed, N
failed`, and exits with 1 if any failed. A failed h.check (an
AssertionError) shows its message alone; any other exception, a broken test
or harness, shows its traceback. A fixture that fails (setUpModule,
setUpClass, or a context they entered) is one FAIL line naming it.

run() and Once are the runner this one replaces, kept for the files not yet
converted; do not use them in new tests."""

import os
import sys
import time
import traceback
import unittest

from harness_checks import Failure


class _Loader(unittest.TestLoader):
    """Discovers test methods in the order the class defines them."""

    def getTestCaseNames(self, testCaseClass):
        names = []
        for klass in reversed(testCaseClass.__mro__):
            for name, value in vars(klass).items():
                if name.startswith(self.testMethodPrefix) and callable(value) \
                        and name not in names:
                    names.append(name)
        return names

    def loadTestsFromModule(self, module, *args, **kwargs):
        # Classes in the order the module defines them, not by name.
        suites = []
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, unittest.TestCase) \
                    and value.__module__ == module.__name__ \
                    and getattr(self, "picked", lambda name: True)(value.__name__):
                suites.append(self.loadTestsFromTestCase(value))
        return self.suiteClass(suites)


class _Result(unittest.TestResult):
    """Prints PASS and FAIL lines as the tests end."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0
        self.failed = 0
        self._start = time.monotonic()

    @staticmethod
    def _name(test):
        # A test method by its name; a fixture (unittest's _ErrorHolder) by
        # its description, such as "setUpClass (test_exact.GlibcTest)".
        return getattr(test, "_testMethodName", None) or test.id()

    def _reason(self, test, err):
        # unittest's own text leaves its frames out of the traceback.
        if issubclass(err[0], AssertionError):
            return str(err[1])
        return self._exc_info_to_string(err, test)

    def startTest(self, test):
        super().startTest(test)
        self._start = time.monotonic()

    def _fail(self, test, err):
        self.failed += 1
        took = time.monotonic() - self._start if hasattr(test, "_testMethodName") else 0.0
        print(f"FAIL {self._name(test)} ({took:.1f} s): {self._reason(test, err)}", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        print(f"PASS {self._name(test)} ({time.monotonic() - self._start:.1f} s)", flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err)

    def addSkip(self, test, reason):
        # These tests never skip (see heapprof_harness); a skip is a failure.
        super().addSkip(test, reason)
        self.failed += 1
        print(f"FAIL {self._name(test)}: skipped ({reason}); these tests never skip",
              flush=True)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.passed += 1
        print(f"PASS {self._name(test)} (expected failure)", flush=True)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.failed += 1
        print(f"FAIL {self._name(test)}: passed, but was expected to fail", flush=True)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._fail(subtest, err)


def _class_filter():
    """Which TestCase classes to run, from the environment: with
    HEAPPROF_TEST_CLASSES=A,B only those; with HEAPPROF_TEST_CLASSES=!A,B
    all but those. ctest runs the timed classes of a file alone and the
    rest beside other tests (tests/integration/CMakeLists.txt)."""
    spec = os.environ.get("HEAPPROF_TEST_CLASSES", "")
    exclude = spec.startswith("!")
    names = {n for n in spec.lstrip("!").split(",") if n}
    if not names:
        return lambda name: True
    return lambda name: (name in names) != exclude


def main(module="__main__"):
    """Runs the TestCase classes of `module` (the script run) as described
    above, those _class_filter() picks; exits with 1 if any test or fixture
    failed, or if a class the filter names does not exist, 0 otherwise."""
    mod = sys.modules[module] if isinstance(module, str) else module
    picked = _class_filter()
    loader = _Loader()
    loader.picked = picked
    suite = loader.loadTestsFromModule(mod)
    named = {n for n in os.environ.get("HEAPPROF_TEST_CLASSES", "").lstrip("!").split(",") if n}
    missing = named - {k for k, v in vars(mod).items()
                       if isinstance(v, type) and issubclass(v, unittest.TestCase)}
    if missing:
        print(f"FAIL discovery: HEAPPROF_TEST_CLASSES names {sorted(missing)}, "
              f"which {mod.__name__} does not define", flush=True)
        sys.exit(1)
    result = _Result()
    suite.run(result)
    if result.testsRun == 0 and not result.failed:
        result.failed += 1
        print(f"FAIL discovery: {mod.__name__} has no unittest.TestCase tests", flush=True)
    print(f"{result.passed} passed, {result.failed} failed", flush=True)
    sys.exit(1 if result.failed else 0)


# --- Deprecated: the runner before unittest ---------------------------------

def run(tests, around=None):
    """Deprecated (use TestCase classes and main()). Runs each test
    function, prints PASS/FAIL lines and `N passed, N failed`, and exits
    with 1 if any failed.

    around, if given, is a function returning a context manager (a Daemon, a
    workload) that every test shares: if entering it fails, each test fails
    with that reason; if leaving it fails (the daemon died), that is one more
    failure.
    """
    passed = failed = 0
    context = None
    setup_error = None
    if around is not None:
        try:
            context = around()
            context.__enter__()
        except Exception as e:
            context = None
            setup_error = e if isinstance(e, Failure) else Failure(traceback.format_exc())
    for test in tests:
        name = test.__name__
        start = time.monotonic()
        try:
            if setup_error is not None:
                raise Failure(f"(setup) {setup_error}")
            test()
        except Failure as e:
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - start:.1f} s): {e}", flush=True)
        except Exception:  # a broken test or harness: show where
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - start:.1f} s): "
                  f"{traceback.format_exc()}", flush=True)
        else:
            passed += 1
            print(f"PASS {name} ({time.monotonic() - start:.1f} s)", flush=True)
    if context is not None:
        try:
            context.__exit__(None, None, None)
        except Exception as e:
            failed += 1
            print(f"FAIL teardown: {e}", flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


class Once:
    """Deprecated (use setUpClass or setUpModule). A fixture computed at
    first use and shared by the tests of a file; if computing it failed,
    every later use fails with the same error."""

    def __init__(self, make):
        self._make = make
        self._done = False
        self._value = None
        self._error = None

    def __call__(self):
        if not self._done:
            self._done = True
            try:
                self._value = self._make()
            except Failure as e:
                self._error = e
            except Exception:
                self._error = Failure(f"fixture {self._make.__name__} failed:\n"
                                      f"{traceback.format_exc()}")
        if self._error is not None:
            raise Failure(f"(fixture {self._make.__name__}) {self._error}")
        return self._value
