"""Create, describe and delete ACLs with kafka-python's KafkaAdminClient.

Run by TestKafkaPythonACLs as: python3 kafka_python_acls.py BOOTSTRAP USER
PASSWORD. It logs in with SASL/PLAIN and prints one JSON object per step:
the ACLs created and failed, the ACLs described, the ACLs deleted, and the
ACLs described after the deletion.
"""

import json
import sys

from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,
                         ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourcePatternFilter, ResourceType)


def show(acl):
    p = acl.resource_pattern
    return "%s:%s:%s %s %s %s %s" % (p.resource_type.name, p.pattern_type.name, p.resource_name,
                                     acl.principal, acl.host, acl.operation.name, acl.permission_type.name)


def main():
    bootstrap, user, password = sys.argv[1:4]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafka-python-acls",
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username=user, sasl_plain_password=password,
                             request_timeout_ms=30000)
    read = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
               ResourcePattern(ResourceType.TOPIC, "orders"))
    write = ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "ord", ACLResourcePatternType.PREFIXED))
    created = admin.create_acls([read, write])
    print(json.dumps({"created": sorted(show(a) for a in created["succeeded"]),
                      "failed": [show(a) + " " + e.__name__ for a, e in created["failed"]]}))

    everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    acls, error = admin.describe_acls(everything)
    print(json.dumps({"described": sorted(show(a) for a in acls), "error": error.__name__}))

    only_read = ACLFilter("User:alice", None, ACLOperation.READ, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL))
    deleted = []
    for _, matches, error in admin.delete_acls([only_read]):
        deleted += [show(a) for a, _ in matches]
        if error.__name__ != "NoError":
            deleted.append(error.__name__)
    print(json.dumps({"deleted": sorted(deleted)}))

    acls, error = admin.describe_acls(everything)
    print(json.dumps({"described": sorted(show(a) for a in acls), "error": error.__name__}))
    admin.close()


if __name__ == "__main__":
    main()
