package world

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// clockSentinel: the skewed node is a third replica; the others get
// replica-priority 0 so that SENTINEL FAILOVER picks it, then the original
// master alone is eligible for the failback.
func (w *world) clockSentinel(ctx context.Context, skew time.Duration, ev *Event) (healFunc, error) {
	orig, err := w.waitSentinelMaster(ctx, "")
	if err != nil {
		return nil, err
	}
	ev.Target = orig
	s, err := w.startSkewed(skew, false, append([]string{"--replicaof", "127.0.0.1", port(orig)}, fencedArgs...)...)
	if s == nil {
		return nil, err
	}
	var others []string // the replicas as started that are not the master
	for _, d := range w.dataNodes() {
		if d.Addr != orig {
			others = append(others, d.Addr)
		}
	}
	heal := func(ctx context.Context) error {
		// the original master alone may be promoted
		errs := []error{setPriority(ctx, orig, 100)}
		for _, a := range others {
			errs = append(errs, setPriority(ctx, a, 0))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		m, err := w.waitSentinelMaster(ctx, "")
		if err == nil && m != orig {
			if err = w.waitSentinelReplicas(ctx, m, orig, others); err == nil {
				if err = fence(ctx, m, "", len(w.dataNodes())); err == nil {
					_, err = w.sent.Failover(ctx, 30*time.Second)
				}
			}
		}
		for _, a := range others {
			err = errors.Join(err, setPriority(ctx, a, 100))
		}
		if err == nil {
			// every sentinel has finished the failback before the skewed
			// node goes: a SENTINEL RESET in the middle of a failover
			// leaves its sentinel on the old master
			err = w.waitFailoverDone(ctx, orig)
		}
		w.removeSkewed(s)
		for _, st := range w.sent.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: st.Addr, MaxRetries: -1, DialTimeout: time.Second})
			err = errors.Join(err, sc.Reset(ctx, redistest.MasterName).Err())
			sc.Close()
		}
		return err
	}
	if err != nil {
		return heal, err
	}
	ev.Detail = fmt.Sprintf("skew %v: %s (faketime) becomes master in place of %s, fails back after %v", skew, s.Addr, orig, ev.Hold.Round(time.Millisecond))
	errs := []error{setPriority(ctx, s.Addr, 100)}
	for _, a := range others {
		errs = append(errs, setPriority(ctx, a, 0))
	}
	if err := errors.Join(errs...); err != nil {
		return heal, err
	}
	if err := w.waitSentinelReplicas(ctx, orig, s.Addr, others); err != nil {
		return heal, err
	}
	if err := fence(ctx, orig, "", len(w.dataNodes())); err != nil {
		return heal, err
	}
	nm, err := w.sent.Failover(ctx, 30*time.Second)
	if err == nil && nm != s.Addr {
		err = fmt.Errorf("world: SENTINEL FAILOVER promoted %s, not the skewed %s", nm, s.Addr)
	}
	return heal, err
}

// waitFailoverDone waits until every sentinel names master, with no
// failover in progress.
func (w *world) waitFailoverDone(ctx context.Context, master string) error {
	return poll(ctx, "failover not done", func(ctx context.Context) error {
		for _, st := range w.sent.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: st.Addr, MaxRetries: -1, DialTimeout: time.Second})
			m, err := sc.Master(ctx, redistest.MasterName).Result()
			sc.Close()
			if err != nil {
				return err
			}
			if addr := m["ip"] + ":" + m["port"]; addr != master || m["flags"] != "master" {
				return fmt.Errorf("sentinel %s: master %s flags %s, want %s", st.Addr, addr, m["flags"], master)
			}
		}
		return nil
	})
}

// setPriority sets replica-priority on the node at addr (0: never
// promoted). It tries again on a connection error: a sentinel
// reconfiguring a replica kills its clients (CLIENT KILL TYPE normal).
func setPriority(ctx context.Context, addr string, p int) error {
	nc := nodeClient(addr)
	defer nc.Close()
	return poll(ctx, "replica-priority not set", func(ctx context.Context) error {
		return nc.ConfigSet(ctx, "replica-priority", strconv.Itoa(p)).Err()
	})
}

// waitSentinelReplicas waits until every sentinel sees want as a healthy
// replica of master with a priority above 0, and each of zero with
// priority 0 (or not at all).
func (w *world) waitSentinelReplicas(ctx context.Context, master, want string, zero []string) error {
	return poll(ctx, "sentinels do not see the replicas", func(ctx context.Context) error {
		for _, st := range w.sent.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: st.Addr, MaxRetries: -1, DialTimeout: time.Second})
			m, err := sc.GetMasterAddrByName(ctx, redistest.MasterName).Result()
			var reps []map[string]string
			if err == nil {
				reps, err = sc.Replicas(ctx, redistest.MasterName).Result()
			}
			sc.Close()
			if err != nil {
				return err
			}
			if len(m) != 2 || m[0]+":"+m[1] != master {
				return fmt.Errorf("sentinel %s names master %v, want %s", st.Addr, m, master)
			}
			ok := false
			for _, r := range reps {
				addr := r["ip"] + ":" + r["port"]
				switch {
				case addr == want:
					ok = r["flags"] == "slave" && r["master-link-status"] == "ok" && r["slave-priority"] != "0" &&
						r["slave-repl-offset"] != "0"
				case contains(zero, addr) && r["slave-priority"] != "0" && addr != master:
					return fmt.Errorf("sentinel %s: %s has priority %s", st.Addr, addr, r["slave-priority"])
				}
			}
			if !ok {
				return fmt.Errorf("sentinel %s does not see %s as a healthy replica", st.Addr, want)
			}
		}
		return nil
	})
}
