package conformance

import (
	"context"
	"errors"
	"maps"

	"github.com/tripodmq/tripod/coord"
)

func alterClientQuotas(t T, be coord.Backend, entity coord.QuotaEntity, alts ...coord.ConfigAlteration) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	got, err := be.AlterClientQuotas(ctx, entity, alts)
	if err != nil {
		t.Fatalf("AlterClientQuotas(%s, %v): got error %v, want nil", entity, alts, err)
	}
	return got
}

func deleteQuota(key string) coord.ConfigAlteration {
	return coord.ConfigAlteration{Op: coord.ConfigDelete, Key: key}
}

// checkQuotas fails t unless s holds exactly want as its client quotas.
func checkQuotas(t T, what string, s *coord.ConfigState, want map[coord.QuotaEntity]map[string]string) {
	t.Helper()
	if !maps.EqualFunc(s.Quotas, want, maps.Equal) {
		t.Fatalf("%s: client quotas: got %v, want %v", what, s.Quotas, want)
	}
}

// testClientQuotasLifecycle: quotas of every entity shape (user,
// client-id, both, ip, and the default of each) are set, changed and
// deleted; each write returns what it stored, a load through the other
// backend and a watch on each backend see it; invalid input changes
// nothing.
func testClientQuotasLifecycle(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitConfigsReady(t, h, c, 2)
	be, other := c.Backend(0), c.Backend(1)
	if s := loadConfigs(t, be, "a fresh store"); len(s.Quotas) != 0 {
		t.Fatalf("a fresh store: client quotas: got %v, want none", s.Quotas)
	}
	watches := []*configWatch{watchConfigs(t, be, "WatchConfigs on backend 1"), watchConfigs(t, other, "WatchConfigs on backend 2")}
	def := coord.DefaultQuotaEntity
	alice := coord.QuotaEntity{User: "alice"}
	aliceApp := coord.QuotaEntity{User: "alice", ClientID: "app/1 *"}
	defaults := coord.QuotaEntity{User: def, ClientID: def}
	want := map[coord.QuotaEntity]map[string]string{}
	steps := []struct {
		what   string
		entity coord.QuotaEntity
		alts   []coord.ConfigAlteration
		want   map[string]string
	}{
		{"a user", alice, []coord.ConfigAlteration{set(coord.QuotaProducerByteRate, "1048576"), set(coord.QuotaRequestPercentage, "50.5")},
			map[string]string{coord.QuotaProducerByteRate: "1048576", coord.QuotaRequestPercentage: "50.5"}},
		{"a user and a client id that needs sanitizing", aliceApp, []coord.ConfigAlteration{set(coord.QuotaConsumerByteRate, "2000")},
			map[string]string{coord.QuotaConsumerByteRate: "2000"}},
		{"the default user and client id", defaults, []coord.ConfigAlteration{set(coord.QuotaControllerMutationRate, "10")},
			map[string]string{coord.QuotaControllerMutationRate: "10"}},
		{"the default user", coord.QuotaEntity{User: def}, []coord.ConfigAlteration{set(coord.QuotaProducerByteRate, "100")},
			map[string]string{coord.QuotaProducerByteRate: "100"}},
		{"a client id", coord.QuotaEntity{ClientID: "app"}, []coord.ConfigAlteration{set(coord.QuotaProducerByteRate, "300")},
			map[string]string{coord.QuotaProducerByteRate: "300"}},
		{"the default client id", coord.QuotaEntity{ClientID: def}, []coord.ConfigAlteration{set(coord.QuotaConsumerByteRate, "400")},
			map[string]string{coord.QuotaConsumerByteRate: "400"}},
		{"an ip", coord.QuotaEntity{IP: "10.0.0.1"}, []coord.ConfigAlteration{set(coord.QuotaConnectionCreationRate, "5")},
			map[string]string{coord.QuotaConnectionCreationRate: "5"}},
		{"the default ip", coord.QuotaEntity{IP: def}, []coord.ConfigAlteration{set(coord.QuotaConnectionCreationRate, "50")},
			map[string]string{coord.QuotaConnectionCreationRate: "50"}},
		{"change and delete a user's quotas", alice, []coord.ConfigAlteration{set(coord.QuotaProducerByteRate, "2097152"),
			deleteQuota(coord.QuotaRequestPercentage), deleteQuota(coord.QuotaConsumerByteRate)},
			map[string]string{coord.QuotaProducerByteRate: "2097152"}},
		{"remove the user's last quota while its client's stays", alice, []coord.ConfigAlteration{deleteQuota(coord.QuotaProducerByteRate)}, nil},
		{"remove the user and client id's", aliceApp, []coord.ConfigAlteration{deleteQuota(coord.QuotaConsumerByteRate)}, nil},
		{"remove the default ip's", coord.QuotaEntity{IP: def}, []coord.ConfigAlteration{deleteQuota(coord.QuotaConnectionCreationRate)}, nil},
	}
	for _, step := range steps {
		got := alterClientQuotas(t, be, step.entity, step.alts...)
		if !maps.Equal(got, step.want) && len(got)+len(step.want) > 0 {
			t.Fatalf("%s: AlterClientQuotas returned %v, want %v", step.what, got, step.want)
		}
		if len(step.want) == 0 {
			delete(want, step.entity)
		} else {
			want[step.entity] = step.want
		}
		checkQuotas(t, step.what, loadConfigs(t, other, step.what), want)
		expected := coord.NewConfigState()
		expected.Quotas = want
		for _, cw := range watches {
			cw.waitFor(t, expected, step.what)
		}
	}
	for _, cw := range watches {
		cw.stop(t)
	}

	before := loadConfigs(t, be, "before the invalid writes")
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	for _, bad := range []struct {
		entity coord.QuotaEntity
		alts   []coord.ConfigAlteration
	}{
		{coord.QuotaEntity{}, []coord.ConfigAlteration{set(coord.QuotaProducerByteRate, "1")}},
		{coord.QuotaEntity{User: "alice", IP: "10.0.0.1"}, []coord.ConfigAlteration{set(coord.QuotaConnectionCreationRate, "1")}},
		{coord.QuotaEntity{IP: "not an ip"}, []coord.ConfigAlteration{set(coord.QuotaConnectionCreationRate, "1")}},
		{coord.QuotaEntity{IP: "10.0.0.1"}, []coord.ConfigAlteration{set(coord.QuotaProducerByteRate, "1")}},
		{alice, []coord.ConfigAlteration{set(coord.QuotaConnectionCreationRate, "1")}},
		{alice, []coord.ConfigAlteration{set(coord.ScramSHA256, "salt=")}},
		{alice, []coord.ConfigAlteration{{Op: coord.ConfigAppend, Key: coord.QuotaProducerByteRate, Value: "1"}}},
	} {
		_, err := be.AlterClientQuotas(ctx, bad.entity, bad.alts)
		if err == nil || errors.Is(err, coord.ErrUnavailable) {
			t.Fatalf("AlterClientQuotas(%s, %v): got %v, want a validation error", bad.entity, bad.alts, err)
		}
	}
	if after := loadConfigs(t, be, "after the invalid writes"); !after.SameContent(before) {
		t.Fatalf("invalid writes changed the store: got %s, want %s", describeConfigs(after), describeConfigs(before))
	}
}

// testClientQuotasBesideScramCredentials: a user's quotas and SCRAM
// credentials (one znode in Kafka's ZooKeeper layout) are written and
// removed independently; neither write touches the other's.
func testClientQuotasBesideScramCredentials(t T, h Harness) {
	c := h.NewCluster(t, 2)
	waitConfigsReady(t, h, c, 2)
	be := c.Backend(0)
	bob := coord.QuotaEntity{User: "bob"}
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	cred := scramCredential(t, coord.ScramSHA256, "secret", []byte("salt-of-bob"))
	if err := be.SetScramCredential(ctx, "bob", cred); err != nil {
		t.Fatalf("SetScramCredential(bob): got error %v, want nil", err)
	}
	alterClientQuotas(t, be, bob, set(coord.QuotaProducerByteRate, "1000"))
	alterClientQuotas(t, be, coord.QuotaEntity{User: "bob", ClientID: "c"}, set(coord.QuotaProducerByteRate, "500"))
	checkCreds := func(what string, want int) {
		t.Helper()
		s, err := c.Backend(1).LoadSecurity(ctx)
		if err != nil {
			t.Fatalf("%s: LoadSecurity: got error %v, want nil", what, err)
		}
		if got := len(s.Users["bob"]); got != want {
			t.Fatalf("%s: bob's credentials: got %d, want %d", what, got, want)
		}
	}
	checkCreds("after setting quotas", 1)
	checkQuotas(t, "after setting quotas", loadConfigs(t, c.Backend(1), "after setting quotas"), map[coord.QuotaEntity]map[string]string{
		bob: {coord.QuotaProducerByteRate: "1000"}, {User: "bob", ClientID: "c"}: {coord.QuotaProducerByteRate: "500"}})
	if err := be.DeleteScramCredential(ctx, "bob", coord.ScramSHA256); err != nil {
		t.Fatalf("DeleteScramCredential(bob): got error %v, want nil", err)
	}
	checkCreds("after deleting the credential", 0)
	checkQuotas(t, "after deleting the credential", loadConfigs(t, c.Backend(1), "after deleting the credential"), map[coord.QuotaEntity]map[string]string{
		bob: {coord.QuotaProducerByteRate: "1000"}, {User: "bob", ClientID: "c"}: {coord.QuotaProducerByteRate: "500"}})
	if err := be.SetScramCredential(ctx, "bob", cred); err != nil {
		t.Fatalf("SetScramCredential(bob) again: got error %v, want nil", err)
	}
	alterClientQuotas(t, be, bob, deleteQuota(coord.QuotaProducerByteRate))
	checkCreds("after deleting the user's quota", 1)
	checkQuotas(t, "after deleting the user's quota", loadConfigs(t, c.Backend(1), "after deleting the user's quota"), map[coord.QuotaEntity]map[string]string{
		{User: "bob", ClientID: "c"}: {coord.QuotaProducerByteRate: "500"}})
}
