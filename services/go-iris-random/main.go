// go-iris-random: study 02's Iris server (seed 001: malekpour's answer to kataras' "Iris Go
// vs .NET Core Kestrel in terms of HTTP performance", main.go), on Iris v12.0.0 (see
// service.toml [versions] for why not the post's v8).
//
//	GET /api/values/{id}   1,024 random characters from the post's 63-character alphabet
//	GET /api/values/fixed  1,024 characters generated once at start, written the same way
//	                       (not in the post: the "fixed" reading of "1KB random string";
//	                       Iris routes the static path before the {id} parameter, so
//	                       /api/values/5 is unaffected)
//
// APP_VARIANT picks how /api/values/{id} makes its string:
//
//   - "faithful": the post's handler and randomString, with the generator the post's Go
//     (1.8) really used: math/rand's package-level source was then a *Rand over a
//     mutex-guarded source seeded with 1, so every rand.Intn took and released one global
//     sync.Mutex (1,024 lock round-trips per response, contended across the server's
//     threads). goLockedRand below rebuilds that global exactly (the same type, seed and
//     Int31n algorithm, so the same sequence); only sync.Mutex itself is today's (Go 1.9
//     added a starvation mode).
//   - "verbatim": the post's randomString exactly as written (rand.Intn from the package),
//     compiled with today's Go, where the unseeded package-level source is the runtime's
//     per-thread generator (lock-free since Go 1.20).
//   - "fair": the shared contract of the study's fair rows: a fresh string per request from
//     math/rand/v2's per-thread ChaCha8 generator (no shared lock), written as bytes with
//     Content-Type and Content-Length set explicitly.
//
// The post bound ":5000"; this binds $HOST (default 127.0.0.1) and $PORT (default 5000).
package main

import (
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"strconv"
	"sync"

	"github.com/kataras/iris/v12"
	"github.com/kataras/iris/v12/context"
)

const letterBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "

// randomString is the post's, unchanged (variant "verbatim").
func randomString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = letterBytes[rand.Intn(len(letterBytes))]
	}
	return string(b)
}

// lockedSource is Go 1.8's math/rand lockedSource (src/math/rand/rand.go, go1.8.3): every
// call takes the one mutex.
type lockedSource struct {
	lk  sync.Mutex
	src rand.Source64
}

func (r *lockedSource) Int63() (n int64) {
	r.lk.Lock()
	n = r.src.Int63()
	r.lk.Unlock()
	return
}

func (r *lockedSource) Uint64() (n uint64) {
	r.lk.Lock()
	n = r.src.Uint64()
	r.lk.Unlock()
	return
}

func (r *lockedSource) Seed(seed int64) {
	r.lk.Lock()
	r.src.Seed(seed)
	r.lk.Unlock()
}

// goLockedRand is Go 1.8's package-level generator: `var globalRand =
// New(&lockedSource{src: NewSource(1).(Source64)})`.
var goLockedRand = rand.New(&lockedSource{src: rand.NewSource(1).(rand.Source64)})

// randomStringGo18 is the post's randomString as Go 1.8 ran it (variant "faithful").
func randomStringGo18(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = letterBytes[goLockedRand.Intn(len(letterBytes))]
	}
	return string(b)
}

// randomBytes is the fair rows' generator: per-thread, nothing shared.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = letterBytes[randv2.IntN(len(letterBytes))]
	}
	return b
}

const size = 1024

// write sends body the fair rows' way: Content-Type and Content-Length set explicitly.
func write(ctx context.Context, body []byte) {
	ctx.Header("Content-Type", "text/plain; charset=utf-8")
	ctx.Header("Content-Length", strconv.Itoa(len(body)))
	ctx.Write(body)
}

func main() {
	variant := os.Getenv("APP_VARIANT")
	if variant == "" {
		variant = "fair"
	}
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "5000"
	}

	app := iris.New()

	var random, fixed context.Handler
	switch variant {
	case "faithful":
		random = func(ctx context.Context) {
			txt := randomStringGo18(size)
			ctx.WriteString(txt)
		}
		fixedTxt := randomStringGo18(size)
		fixed = func(ctx context.Context) { ctx.WriteString(fixedTxt) }
	case "verbatim":
		random = func(ctx context.Context) {
			txt := randomString(size)
			ctx.WriteString(txt)
		}
		fixedTxt := randomString(size)
		fixed = func(ctx context.Context) { ctx.WriteString(fixedTxt) }
	case "fair":
		random = func(ctx context.Context) { write(ctx, randomBytes(size)) }
		fixedBody := randomBytes(size)
		fixed = func(ctx context.Context) { write(ctx, fixedBody) }
	default:
		fmt.Fprintf(os.Stderr, "APP_VARIANT=%q: expected one of faithful, verbatim, fair\n", variant)
		os.Exit(2)
	}

	// the fixed route answers the way the variant's random route does (the post's
	// ctx.WriteString, or the fair rows' explicit headers), so the two differ by the
	// string's generation only
	app.Get("/api/values/fixed", fixed)
	app.Get("/api/values/{id}", random)

	app.Run(iris.Addr(host + ":" + port))
}
