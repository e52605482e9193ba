#!/usr/bin/env bash
# deps.sh installs what tripod's tests need and a fresh Debian machine lacks:
# a ZooKeeper server (Debian's `zookeeper`, run from its jars by the test
# harness), kcat (a librdkafka client for the command-line checks) and
# kafka-python (Debian's python3-kafka, whose admin client the ACL tests run)
# and confluent-kafka (Debian's python3-confluent-kafka, librdkafka's Python
# binding, whose transactional producer the transaction tests run) and
# chromium (Debian's, headless, in which the console's browser tests run).
set -euo pipefail

missing=()
[[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || missing+=(python3-kafka)
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || missing+=(python3-confluent-kafka)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
