module github.com/sandgate-dev/sandgate/bindings/go

go 1.24
