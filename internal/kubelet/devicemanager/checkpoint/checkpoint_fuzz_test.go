package checkpoint

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecode: any content of kubelet_internal_checkpoint decodes or is an
// error, never a panic; an error comes with no entries; what decodes is
// written back (encode) as a file that decodes to the same. Each input is
// also tried resealed (its checksum recomputed) so that the fuzzer gets past
// the checksum: whatever the JSON holds, the file this kubelet writes for it
// reads back.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(upstreamCheckpoint))
	for _, seed := range []string{
		`{"Data":{"PodDeviceEntries":null,"RegisteredDevices":null},"Checksum":0}`,
		`{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}},"Checksum":1}`,
		`{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"example.com/gpu","DeviceIDs":{"0":["a","b"],"1":null},"AllocResp":""}]},"Checksum":7}`,
		`{"Data":{"PodDeviceEntries":[{"DeviceIDs":{"x":[]}}]}}`,
		`{"Data":{"PodDeviceEntries":[{"AllocResp":"not base64"}]}}`,
		`{"Data":{"RegisteredDevices":{"example.com/gpu":["\ud800"]}},"Checksum":-1}`,
		`{"Checksum":18446744073709551616}`, `null`, `[`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		checkDecode(t, content)
		var d Data
		if json.Unmarshal(content, &d) != nil {
			return
		}
		d.Checksum = checksum(d.Data)
		resealed, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", d, err)
		}
		if !checkDecode(t, resealed) {
			t.Fatalf("resealed checkpoint %s does not decode", resealed)
		}
	})
}

// checkDecode decodes content and, when it is accepted, checks that it
// survives encode and decode; it reports whether content was accepted.
func checkDecode(t *testing.T, content []byte) bool {
	t.Helper()
	entries, registered, err := decode(content)
	if err != nil {
		if entries != nil || registered != nil {
			t.Fatalf("decode error %v with entries %+v %v", err, entries, registered)
		}
		return false
	}
	again, err := encode(entries, registered)
	if err != nil {
		t.Fatalf("encode what decoded (%+v %v): %v", entries, registered, err)
	}
	entries2, registered2, err := decode(again)
	if err != nil || !reflect.DeepEqual(entries2, entries) || !reflect.DeepEqual(registered2, registered) {
		t.Fatalf("round trip of %s:\n%s\n= %+v %v %v, want %+v %v", content, again, entries2, registered2, err, entries, registered)
	}
	return true
}
