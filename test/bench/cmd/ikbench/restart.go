package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/test/bench"
)

// etcdEndpoints is the child control plane's etcd (serverInfo.Etcd).
var etcdEndpoints string

// compactEtcd compacts the child's etcd up to its current revision (as
// controlplane.ControlPlane.Compact does), so that a watch from an older
// resourceVersion answers 410.
func compactEtcd(ctx context.Context) error {
	if etcdEndpoints == "" {
		return fmt.Errorf("the control plane did not say where its etcd is")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(etcdEndpoints, ","), DialTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Put(ctx, "/ikbench-compaction-marker", time.Now().String())
	if err != nil {
		return err
	}
	_, err = c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	return err
}

// runRestart is ikbench -restart: the restart-from-disk scenario alone.
func runRestart(ctx context.Context, rc *rest.Config, stop func(), sizes []int, runs, events int, persistOnly, persistCompact bool, persistProfile, out string) int {
	start := time.Now()
	restart, persist, err := bench.RunRestart(ctx, rc, bench.RestartConfig{
		Sizes: sizes, Runs: runs, PersistEvents: events, Compact: compactEtcd, SkipRestart: persistOnly,
		PersistCPUProfile: persistProfile, PersistCompact: persistCompact,
		Writer: persistWriter(rc), Together: persistTogether(rc),
		Logf: func(f string, a ...any) { log.Printf(f, a...) },
	})
	stop()
	if err != nil {
		log.Printf("run failed: %v", err)
	}
	if restart == nil {
		return 1
	}
	table := fmt.Sprintf("ikbench -restart %s: GOMAXPROCS=%d, sizes=%v, runs=%d, persistence %d events; took %v\n\n%s\n%s",
		time.Now().Format("2006-01-02"), runtime.GOMAXPROCS(0), sizes, runs, events,
		time.Since(start).Round(time.Second), restart.Markdown(), persist.Markdown())
	fmt.Println(table)
	if out != "" {
		if werr := os.WriteFile(out, []byte(table), 0o644); werr != nil {
			log.Print(werr)
		}
	}
	if err != nil {
		return 1
	}
	return 0
}

// persistArgs is what a -persist-write child is told.
type persistArgs struct {
	Host, Token string
	Tag         string
	M, N        int
	Rate        float64
}

// persistWriter runs the persistence measurement's writes in a child
// process of this binary, so that the measuring process's CPU is the
// informer's alone.
func persistWriter(rc *rest.Config) func(ctx context.Context, tag string, m, n int, rate float64) error {
	return func(ctx context.Context, tag string, m, n int, rate float64) error {
		arg, err := json.Marshal(persistArgs{Host: rc.Host, Token: rc.BearerToken, Tag: tag, M: m, N: n, Rate: rate})
		if err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, self, "-persist-write", string(arg))
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("writer process: %w", err)
		}
		return nil
	}
}

func persistWriteChild(arg string) {
	var a persistArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		log.Fatal(err)
	}
	rc := childConfig(a.Host, a.Token)
	if err := bench.PersistWrite(context.Background(), rc, a.Tag, a.M, a.N, a.Rate); err != nil {
		log.Fatal(err)
	}
}

// persistSideArgs is what a -persist-side child is told.
type persistSideArgs struct {
	Host, Token string
	Side        bench.PersistSide
}

// persistTogether runs the persistence measurement's sides at the same
// time, each in a child process of this binary (-persist-side). A child
// prints "ready" when its informer is synced and quiet, and starts its
// window when it reads a line on its standard input; then it prints its
// sample as JSON.
func persistTogether(rc *rest.Config) func(ctx context.Context, sides []bench.PersistSide, write func() error) ([]bench.PersistSample, error) {
	return func(ctx context.Context, sides []bench.PersistSide, write func() error) (_ []bench.PersistSample, err error) {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type child struct {
			cmd *exec.Cmd
			in  io.WriteCloser
			out *bufio.Reader
		}
		children := make([]child, len(sides))
		defer func() {
			if err != nil {
				cancel() // a failed side, or the writes, end the others
			}
			for _, c := range children {
				if c.cmd != nil && c.cmd.Process != nil {
					_ = c.cmd.Wait()
				}
			}
		}()
		for i, s := range sides {
			arg, err := json.Marshal(persistSideArgs{Host: rc.Host, Token: rc.BearerToken, Side: s})
			if err != nil {
				return nil, err
			}
			cmd := exec.CommandContext(ctx, self, "-persist-side", string(arg))
			cmd.Stderr = os.Stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				return nil, err
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				return nil, err
			}
			if err := cmd.Start(); err != nil {
				return nil, fmt.Errorf("side %s: %w", s.Name, err)
			}
			children[i] = child{cmd: cmd, in: in, out: bufio.NewReader(out)}
		}
		for i, c := range children {
			if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
				return nil, fmt.Errorf("side %s did not get ready: %q %v", sides[i].Name, line, err)
			}
		}
		for i, c := range children {
			if _, err := io.WriteString(c.in, "go\n"); err != nil {
				return nil, fmt.Errorf("side %s: %w", sides[i].Name, err)
			}
		}
		if err := write(); err != nil {
			return nil, err
		}
		samples := make([]bench.PersistSample, len(sides))
		for i, c := range children {
			if err := json.NewDecoder(c.out).Decode(&samples[i]); err != nil {
				return nil, fmt.Errorf("side %s: %w", sides[i].Name, err)
			}
		}
		return samples, nil
	}
}

// persistSideChild is the -persist-side child (persistTogether).
func persistSideChild(arg string) {
	var a persistSideArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		log.Fatal(err)
	}
	rc := childConfig(a.Host, a.Token)
	in := bufio.NewReader(os.Stdin)
	s, err := bench.MeasurePersistSide(context.Background(), rc, a.Side, func() error {
		if _, err := fmt.Println("ready"); err != nil {
			return err
		}
		_, err := in.ReadString('\n')
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
		log.Fatal(err)
	}
}

// childConfig is the client configuration of a child process of this
// binary: the parent's API server (host, bearer token; its serving
// certificate is self-signed) without client-side rate limiting.
func childConfig(host, token string) *rest.Config {
	return &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 1000, Burst: 2000}
}
