package resources

import "testing"

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)

func TestParseThresholds(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc    string
		in      map[string]string
		want    map[string]int64 // signal -> value for a capacity of 1000
		wantErr bool
	}{
		{desc: "nil", in: nil, want: map[string]int64{}},
		{
			desc: "upstream defaults",
			in: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%",
				"nodefs.inodesFree": "5%", "imagefs.available": "15%"},
			want: map[string]int64{"memory.available": 100 * mi, "nodefs.available": 100,
				"nodefs.inodesFree": 50, "imagefs.available": 150},
		},
		{desc: "0% and 100% disable", in: map[string]string{"memory.available": "0%", "nodefs.available": "100%"}, want: map[string]int64{}},
		{desc: "fraction percent", in: map[string]string{"pid.available": "2.5%"}, want: map[string]int64{"pid.available": 25}},
		{desc: "unknown signal", in: map[string]string{"cpu.available": "1"}, wantErr: true},
		{desc: "negative percent", in: map[string]string{"memory.available": "-1%"}, wantErr: true},
		{desc: "percent over 100", in: map[string]string{"memory.available": "101%"}, wantErr: true},
		{desc: "zero quantity", in: map[string]string{"memory.available": "0"}, wantErr: true},
		{desc: "negative quantity", in: map[string]string{"memory.available": "-1Mi"}, wantErr: true},
		{desc: "garbage", in: map[string]string{"memory.available": "lots"}, wantErr: true},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			got, err := ParseThresholds(test.in)
			if (err != nil) != test.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, test.wantErr)
			}
			if test.wantErr {
				return
			}
			values := map[string]int64{}
			for _, th := range got {
				values[th.Signal] = th.Value(1000)
			}
			if len(values) != len(test.want) {
				t.Fatalf("got %v, want %v", values, test.want)
			}
			for k, v := range test.want {
				if values[k] != v {
					t.Errorf("%s = %d, want %d", k, values[k], v)
				}
			}
		})
	}
}
