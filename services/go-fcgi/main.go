// go-fcgi: study 03's Go row. The seed's handler (200, Content-Type text/html, the 62-byte
// body) over Go's standard library, as FastCGI (net/http/fcgi, behind nginx) or plain HTTP
// (net/http, without nginx).
//
// Environment:
//
//	MODE   fcgi (default) or http
//	HOST   the address to listen on (default 127.0.0.1)
//	PORTS  the ports to listen on, comma-separated (else PORT): one listener per port
//	SPLIT  1: one process per port (this binary starts itself once per port, as the seed's
//	       four `node index.js PORT` processes); else one process serves every port
//
// GOMAXPROCS is Go's default (the CPUs the process may run on).
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/fcgi"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

const body = "<!DOCTYPE html><html><body><h1>Hello World!</h1></body></html>"

func hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, body)
}

func main() {
	mode := env("MODE", "fcgi")
	if mode != "fcgi" && mode != "http" {
		log.Fatalf("MODE must be fcgi or http, got %q", mode)
	}
	host := env("HOST", "127.0.0.1")
	ports := strings.Split(env("PORTS", env("PORT", "8080")), ",")
	if os.Getenv("SPLIT") == "1" && len(ports) > 1 {
		os.Exit(split(ports))
	}
	errs := make(chan error, len(ports))
	for _, port := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("go-fcgi %d listening on %s (%s)", os.Getpid(), ln.Addr(), mode)
		go func() {
			if mode == "fcgi" {
				errs <- fcgi.Serve(ln, http.HandlerFunc(hello))
			} else {
				errs <- http.Serve(ln, http.HandlerFunc(hello))
			}
		}()
	}
	log.Fatal(<-errs)
}

// split starts this binary once per port (SPLIT unset, PORTS one port each), passes SIGTERM
// and SIGINT on, and when one exits stops the others; returns the exit code.
func split(ports []string) int {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	var children []*exec.Cmd
	done := make(chan error, len(ports))
	for _, port := range ports {
		cmd := exec.Command(self)
		cmd.Env = append(withoutSplit(os.Environ()), "PORTS="+port, "PORT="+port)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		children = append(children, cmd)
		go func() { done <- cmd.Wait() }()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	code, remaining := 0, len(children)
	select {
	case s := <-sigs:
		for _, c := range children {
			c.Process.Signal(s)
		}
	case err := <-done:
		fmt.Fprintf(os.Stderr, "go-fcgi: a process exited (%v); stopping the others\n", err)
		code, remaining = 1, remaining-1
		for _, c := range children {
			c.Process.Signal(syscall.SIGTERM)
		}
	}
	for ; remaining > 0; remaining-- {
		<-done
	}
	return code
}

func withoutSplit(environ []string) []string {
	out := environ[:0:0]
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "SPLIT=") && !strings.HasPrefix(kv, "PORTS=") && !strings.HasPrefix(kv, "PORT=") {
			out = append(out, kv)
		}
	}
	return out
}

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
