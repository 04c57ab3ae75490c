package codec

import (
	"net/http"
	"sync"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/informerkit/informerkit/internal/decode"
)

// Clients hands out dynamic clients that decode with the fast path, one
// per decode.Options. They are built as client-go's dynamic.NewForConfig
// builds its client (dynamic.ConfigFor, an unversioned REST client, the
// same transport wrappers, authentication, retries and warning handler)
// except for the serializer, and share one HTTP client and one rate
// limiter, so together they send no more requests than one client-go
// dynamic client would. Safe for concurrent use.
type Clients struct {
	cfg  *rest.Config
	http *http.Client

	raw *RawObjects // ForRaw's clients'

	mu      sync.Mutex // guards clients
	clients map[clientKey]dynamic.Interface
}

// clientKey tells the clients apart.
type clientKey struct {
	opts    decode.Options
	compact bool
	raw     bool
}

// NewClients prepares fast-path dynamic clients for cfg.
func NewClients(cfg *rest.Config) (*Clients, error) {
	config := dynamic.ConfigFor(cfg)
	config.GroupVersion = nil
	config.APIPath = "/if-you-see-this-search-for-the-break" // as dynamic.NewForConfigAndClient
	if config.RateLimiter == nil {
		qps, burst := config.QPS, config.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		if qps > 0 {
			config.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
		}
	}
	h, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	c := &Clients{cfg: config, http: h, raw: NewRawObjects(), clients: map[clientKey]dynamic.Interface{}}
	if _, err := c.For(decode.Options{}); err != nil {
		return nil, err
	}
	return c, nil
}

// For returns the client whose decoding skips what opts says.
func (c *Clients) For(opts decode.Options) (dynamic.Interface, error) {
	return c.client(clientKey{opts: opts})
}

// ForCompact returns the client of For whose objects decode to compact
// envelopes (CompactNegotiatedSerializer): only for informers whose
// transform turns every envelope into a *cache.Compact.
func (c *Clients) ForCompact(opts decode.Options) (dynamic.Interface, error) {
	return c.client(clientKey{opts: opts, compact: true})
}

// ForRaw returns the client of For that leaves the JSON of each watch
// event's object in Raw: only for informers that take every object they
// receive from Raw (RawObjects bounds what is not taken).
func (c *Clients) ForRaw(opts decode.Options) (dynamic.Interface, error) {
	return c.client(clientKey{opts: opts, raw: true})
}

// Raw is where ForRaw's clients leave the JSON of watch events' objects.
func (c *Clients) Raw() *RawObjects { return c.raw }

func (c *Clients) client(key clientKey) (dynamic.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.clients[key]; ok {
		return d, nil
	}
	config := rest.CopyConfig(c.cfg)
	switch {
	case key.compact:
		config.NegotiatedSerializer = CompactNegotiatedSerializer(config.NegotiatedSerializer, key.opts)
	case key.raw:
		config.NegotiatedSerializer = RawNegotiatedSerializer(config.NegotiatedSerializer, key.opts, c.raw)
	default:
		config.NegotiatedSerializer = NegotiatedSerializer(config.NegotiatedSerializer, key.opts)
	}
	rc, err := rest.UnversionedRESTClientForConfigAndClient(config, c.http)
	if err != nil {
		return nil, err
	}
	d := dynamic.New(rc)
	c.clients[key] = d
	return d, nil
}
