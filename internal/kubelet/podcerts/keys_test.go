package podcerts

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestNewKeyEveryType(t *testing.T) {
	for _, kt := range []string{"RSA3072", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"} {
		keyPEM, csrDER, err := newKey(kt)
		if err != nil {
			t.Fatalf("%s: %v", kt, err)
		}
		b, rest := pem.Decode(keyPEM)
		if b == nil || b.Type != "PRIVATE KEY" || len(rest) != 0 {
			t.Fatalf("%s: key is not one PEM PRIVATE KEY block: %q", kt, keyPEM)
		}
		if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err != nil {
			t.Errorf("%s: key: %v", kt, err)
		}
		csr, err := x509.ParseCertificateRequest(csrDER)
		if err != nil {
			t.Fatalf("%s: stub request: %v", kt, err)
		}
		if err := csr.CheckSignature(); err != nil {
			t.Errorf("%s: stub request signature: %v", kt, err)
		}
	}
	if _, _, err := newKey("DSA1024"); err == nil || err.Error() != `unknown key type "DSA1024"` {
		t.Errorf("unknown key type: %v", err)
	}
}

func TestCleanChainKeepsOnlyCertificateBlocks(t *testing.T) {
	a := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("leaf")})
	b := pem.EncodeToMemory(&pem.Block{Type: "TRUSTED CERTIFICATE", Headers: map[string]string{"Note": "x"}, Bytes: []byte("ca")})
	in := append(append(append([]byte("subject=leaf\n"), a...), "between\n"...), b...)
	want := append(append([]byte{}, a...), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("ca")})...)
	if got := cleanChain(in); !bytes.Equal(got, want) {
		t.Errorf("cleanChain =\n%s\nwant\n%s", got, want)
	}
	if got := cleanChain([]byte("no PEM")); len(got) != 0 {
		t.Errorf("cleanChain of no PEM = %q", got)
	}
}

func TestMetricState(t *testing.T) {
	now := time.Now()
	fresh := credential{beginRefreshAt: now.Add(time.Hour), notAfter: now.Add(2 * time.Hour)}
	for _, tc := range []struct {
		st   state
		want string
	}{
		{state{phase: phaseInitial}, "not_yet_issued"},
		{state{phase: phaseWaiting}, "not_yet_issued"},
		{state{phase: phaseFresh, current: fresh}, "fresh"},
		{state{phase: phaseRefreshing, current: credential{beginRefreshAt: now.Add(-5 * time.Minute), notAfter: now.Add(time.Hour)}}, "fresh"},
		{state{phase: phaseRefreshing, current: credential{beginRefreshAt: now.Add(-11 * time.Minute), notAfter: now.Add(time.Hour)}}, "overdue_for_refresh"},
		{state{phase: phaseFresh, current: credential{beginRefreshAt: now.Add(-time.Hour), notAfter: now.Add(-time.Second)}}, "expired"},
		{state{phase: phaseDenied}, "denied"},
		{state{phase: phaseFailed}, "failed"},
	} {
		if got := tc.st.metricState(now); got != tc.want {
			t.Errorf("phase %d: %s, want %s", tc.st.phase, got, tc.want)
		}
	}
}
