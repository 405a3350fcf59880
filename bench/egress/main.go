// Command egress measures what the egress gateway adds on loopback and
// prints the figures:
//
//	go run ./bench/egress [-n 2000] [-mb 100] [-rounds 3]
//
// An HTTPS server with its own test CA stands in for two upstream names,
// both pinned to 127.0.0.1: one tunneled, one intercepted (a secret bound
// to it, the placeholder replaced in every request's Authorization
// header). The gateway serves a Unix socket, as it does for a sandbox.
// Latency: n small GET requests on one kept-alive connection per
// variant (direct, through a CONNECT tunnel, through interception),
// interleaved in blocks of 100 so that load from other processes hits all
// variants alike; p50 and p99 and what the gateway adds at each. Download:
// an mb-megabyte body read directly, through a tunnel and through
// interception, rounds times each; the best throughput of each and its
// ratio to direct.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/agent-runner/agent-runner/egress"
)

const (
	tunnelHost    = "tunnel.bench.test"
	interceptHost = "intercept.bench.test"
	secretValue   = "bench-secret-value"
)

func main() {
	n := flag.Int("n", 2000, "requests per variant for the latency figures")
	mb := flag.Int("mb", 100, "megabytes per download")
	rounds := flag.Int("rounds", 3, "downloads per variant")
	flag.Parse()
	if err := run(*n, *mb, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench/egress:", err)
		os.Exit(1)
	}
}

func run(n, mb, rounds int) error {
	roots, leaf, err := testPKI()
	if err != nil {
		return err
	}
	upstream, port, err := serveUpstream(leaf)
	if err != nil {
		return err
	}
	defer upstream.Close()

	placeholder := egress.Placeholder("BENCH_KEY")
	socket, ca, stop, err := serveGateway(roots, port, placeholder)
	if err != nil {
		return err
	}
	defer stop()
	caPool := x509.NewCertPool()
	caPool.AppendCertsFromPEM(ca.CertPEM())

	variants := []*variant{
		{name: "direct", client: directClient(roots, port), url: fmt.Sprintf("https://%s:%d", tunnelHost, port)},
		{name: "tunnel", client: proxiedClient(roots, socket), url: fmt.Sprintf("https://%s:%d", tunnelHost, port)},
		{name: "intercept", client: proxiedClient(caPool, socket), url: fmt.Sprintf("https://%s:%d", interceptHost, port), auth: "Bearer " + placeholder},
	}
	for _, v := range variants {
		if err := v.get("/", 200); err != nil { // warm-up: connection, handshake, leaf
			return fmt.Errorf("%s warm-up: %w", v.name, err)
		}
	}
	for done := 0; done < n; done += 100 {
		for _, v := range variants {
			for i := 0; i < min(100, n-done); i++ {
				start := time.Now()
				if err := v.get("/", 1); err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
				v.lat = append(v.lat, time.Since(start))
			}
		}
	}
	fmt.Printf("latency, %d HTTPS GET requests on one kept-alive connection each (loopback, %s)\n", n, time.Now().Format(time.DateOnly))
	direct := variants[0]
	for _, v := range variants {
		p50, p99 := pct(v.lat, 50), pct(v.lat, 99)
		added := ""
		if v != direct {
			added = fmt.Sprintf("   added: p50 %8s  p99 %8s", p50-pct(direct.lat, 50), p99-pct(direct.lat, 99))
		}
		fmt.Printf("  %-10s p50 %8s  p99 %8s%s\n", v.name, p50, p99, added)
	}

	fmt.Printf("download, %d MB, best of %d\n", mb, rounds)
	best := map[*variant]float64{}
	for range rounds {
		for _, v := range variants {
			start := time.Now()
			if err := v.get("/download?mb="+strconv.Itoa(mb), 1); err != nil {
				return fmt.Errorf("%s download: %w", v.name, err)
			}
			rate := float64(mb) / time.Since(start).Seconds()
			best[v] = max(best[v], rate)
		}
	}
	for _, v := range variants {
		fmt.Printf("  %-10s %8.0f MB/s  %5.1f%% of direct\n", v.name, best[v], 100*best[v]/best[direct])
	}
	return nil
}

type variant struct {
	name   string
	client *http.Client
	url    string
	auth   string
	lat    []time.Duration
}

// get requests path times times and reads each body to the end.
func (v *variant) get(path string, times int) error {
	for range times {
		req, err := http.NewRequest("GET", v.url+path, nil)
		if err != nil {
			return err
		}
		if v.auth != "" {
			req.Header.Set("Authorization", v.auth)
		}
		resp, err := v.client.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %s", resp.Status)
		}
	}
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// serveUpstream serves "/" (a short body) and "/download?mb=N" over TLS on
// loopback. Intercepted requests must carry the real secret.
func serveUpstream(leaf tls.Certificate) (*http.Server, int, error) {
	chunk := make([]byte, 64<<10)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" && a != "Bearer "+secretValue {
			http.Error(w, "placeholder not replaced", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/download", func(w http.ResponseWriter, r *http.Request) {
		mb, _ := strconv.Atoi(r.URL.Query().Get("mb"))
		w.Header().Set("Content-Length", strconv.Itoa(mb<<20))
		for i := 0; i < mb<<20/len(chunk); i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"http/1.1"}}}
	go srv.ServeTLS(ln, "", "")
	return srv, ln.Addr().(*net.TCPAddr).Port, nil
}

// serveGateway serves a run that allows both names and binds the secret
// to the intercepted one, on a Unix socket.
func serveGateway(roots *x509.CertPool, port int, placeholder string) (string, *egress.CA, func(), error) {
	g, err := egress.New(egress.Config{
		Resolve:       map[string]string{tunnelHost: "127.0.0.1", interceptHost: "127.0.0.1"},
		UpstreamRoots: roots,
	})
	if err != nil {
		return "", nil, nil, err
	}
	rules, err := egress.ParseRules([]string{fmt.Sprintf("%s:%d", tunnelHost, port), fmt.Sprintf("%s:%d", interceptHost, port)})
	if err != nil {
		return "", nil, nil, err
	}
	ca, err := egress.NewCA()
	if err != nil {
		return "", nil, nil, err
	}
	dir, err := os.MkdirTemp("", "bench-egress-")
	if err != nil {
		return "", nil, nil, err
	}
	socket := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return "", nil, nil, err
	}
	run := &egress.Run{ID: "bench", Rules: rules, Bindings: []egress.Binding{{
		Name: "BENCH_KEY", Placeholder: placeholder, Value: secretValue, Hosts: rules[1:],
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := g.Serve(ctx, ln, run, ca); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
		}
	}()
	return socket, ca, func() { cancel(); <-done; os.RemoveAll(dir) }, nil
}

func directClient(roots *x509.CertPool, port int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		},
	}}
}

func proxiedClient(roots *x509.CertPool, socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.invalid"}),
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// testPKI makes a root and a leaf for both upstream names.
func testPKI() (*x509.CertPool, tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	root := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, root, root, &key.PublicKey, key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	rootCert, err := x509.ParseCertificate(rootDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "bench upstream"}, DNSNames: []string{tunnelHost, interceptHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, rootCert, &leafKey.PublicKey, key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(rootCert)
	return pool, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, nil
}
