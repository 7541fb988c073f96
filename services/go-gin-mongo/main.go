// go-gin-mongo: the Go API of the DotnetGoRustBenchmark study (study 01), in two variants.
//
//	GET /helloWorld  a small JSON greeting
//	GET /users/:id   one user document read from MongoDB (db "mongo", collection "users")
//
// APP_VARIANT picks the behaviour (see faithful.go and fair.go):
//
//	faithful  the study's code behaviour: gin.Default() (Logger + Recovery) in Gin's debug
//	          mode, a new MongoDB client per request, the published bodies and casings
//	fair      release mode, no per-request log, one pooled client, the shared contract
//
// HOST and PORT give the listen address (default 127.0.0.1:8080; the original listened on
// ":8080", i.e. every interface, which this project never does). CONNECTION_STRING is the
// MongoDB URL, as in the original's docker-compose.yml.
package main

import (
	"log"
	"os"

	"github.com/gin-gonic/gin"
)

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	variant := getenv("APP_VARIANT", "fair")
	uri := os.Getenv("CONNECTION_STRING")
	if uri == "" {
		log.Fatal("CONNECTION_STRING not set")
	}
	var router *gin.Engine
	switch variant {
	case "faithful":
		router = faithfulRouter(uri)
	case "fair":
		router = fairRouter(uri)
	default:
		log.Fatalf("APP_VARIANT=%q: expected one of faithful, fair", variant)
	}
	addr := getenv("HOST", "127.0.0.1") + ":" + getenv("PORT", "8080")
	log.Printf("go-gin-mongo (%s) listening on %s, gin mode %s", variant, addr, gin.Mode())
	if err := router.Run(addr); err != nil {
		log.Fatalf("cannot serve on %s: %v", addr, err)
	}
}
