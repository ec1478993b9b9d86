"""The session spatec starts: no web UI, the driver on 127.0.0.1 for a master on this
machine, Sedona's jar on spark.jars."""
import pytest

from spatec.runners.spark.session import (
    jvm_settings,
    local_master,
    network_settings,
    sedona_jar,
    sedona_missing,
    thp_on_request,
    with_jar,
)


@pytest.mark.parametrize("master,local", [
    ("local[*]", True), ("local[2]", True), ("spark://127.0.0.1:7077", True),
    ("spark://localhost:7077", True), ("spark://10.1.2.3:7077", False), ("yarn", False),
    ("k8s://https://api.example:6443", False),
])
def test_driver_bound_to_loopback_unless_master_is_elsewhere(master, local):
    assert local_master(master) is local
    got = network_settings(master)
    assert got["spark.ui.enabled"] == "false"
    assert got.get("spark.driver.bindAddress") == ("127.0.0.1" if local else None)
    assert got.get("spark.driver.host") == ("127.0.0.1" if local else None)


def test_running_session_listens_on_loopback_without_ui(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.sparkContext.uiWebUrl is None


def test_a_local_jvm_compiles_with_the_first_tier_only_in_small_pages_and_a_cluster_keeps_its_default(spark, tmp_path):
    mode = tmp_path / "enabled"
    for text, huge in (("always [madvise] never\n", True), ("[always] madvise never\n", False),
                       ("always madvise [never]\n", False)):
        mode.write_text(text)
        want = "-XX:TieredStopAtLevel=1" + (" -XX:+UseTransparentHugePages" if huge else "")
        assert jvm_settings("local[2]", str(mode)) == {"spark.driver.extraJavaOptions": want,
                                                       "spark.buffer.pageSize": "4m"}
    assert jvm_settings("local[2]", str(tmp_path / "absent")) == {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1", "spark.buffer.pageSize": "4m"}  # (not Linux)
    assert jvm_settings("spark://127.0.0.1:7077") == {} and jvm_settings("yarn") == {}
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    args = list(bean.getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in args      # (the session's JVM got it)
    assert spark.sparkContext.getConf().get("spark.buffer.pageSize") == "4m"
    assert ("-XX:+UseTransparentHugePages" in args) == thp_on_request()


def test_sedona_jar_on_spark_jars(spark):
    if sedona_missing() is not None:
        pytest.skip(sedona_missing())
    assert sedona_jar() in spark.sparkContext.getConf().get("spark.jars", "").split(",")


def test_with_jar_keeps_user_jars_and_a_configured_sedona():
    assert with_jar({"spark.jars": "/a.jar"}, "/s.jar")["spark.jars"] == "/a.jar,/s.jar"
    assert with_jar({}, "/s.jar")["spark.jars"] == "/s.jar"
    given = {"spark.jars.packages": "org.apache.sedona:sedona-spark-shaded-4.0_2.13:1.8.0"}
    assert with_jar(given, "/s.jar") == given
    assert with_jar({}, None) == {}
