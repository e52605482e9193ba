package zk

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// TestBrokerZNodeIsKafkas reads a /brokers/ids/N as a Kafka broker writes
// it, with named listeners, and writes a tripod broker back the same way.
func TestBrokerZNodeIsKafkas(t *testing.T) {
	kafka := `{"features":{},"listener_security_protocol_map":{"CLIENT":"SSL","BROKER":"PLAINTEXT"},
		"endpoints":["CLIENT://kafka-1.example.com:9093","BROKER://[fd00::7]:9094"],"jmx_port":-1,"port":9094,
		"host":"fd00::7","version":5,"timestamp":"1700000000000","rack":"r1"}`
	got, err := decodeBroker(1, []byte(kafka), &zk.Stat{Czxid: 42})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	want := coord.Broker{ID: 1, Host: "fd00::7", Port: 9094, Rack: "r1", Epoch: 42, Endpoints: []coord.Endpoint{
		{Listener: "CLIENT", Host: "kafka-1.example.com", Port: 9093, SecurityProtocol: "SSL"},
		{Listener: "BROKER", Host: "fd00::7", Port: 9094, SecurityProtocol: "PLAINTEXT"},
	}}
	if !got.Equal(want) {
		t.Fatalf("decode Kafka's znode: got %+v, want %+v", got, want)
	}
	want.Epoch = 7
	back, err := decodeBroker(1, encodeBroker(want), &zk.Stat{Czxid: 7})
	if err != nil || !back.Equal(want) {
		t.Fatalf("round trip: got %+v, %v, want %+v", back, err, want)
	}
	// A broker without endpoints has one PLAINTEXT listener, written as
	// Kafka would and read back as none.
	plain := coord.Broker{ID: 2, Host: "127.0.0.1", Port: 9092, Epoch: 8}
	back, err = decodeBroker(2, encodeBroker(plain), &zk.Stat{Czxid: 8})
	if err != nil || !back.Equal(plain) {
		t.Fatalf("round trip without endpoints: got %+v, %v, want %+v", back, err, plain)
	}
	if _, err := decodeBroker(3, []byte(`{"endpoints":["no-scheme"],"host":"h","port":1}`), &zk.Stat{}); err == nil {
		t.Fatalf("decode an endpoint without a listener: got no error")
	}
}
