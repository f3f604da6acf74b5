// The app's API, failing: a 500 that says which request it was (the X-Request-Id the
// dev proxy sent), as a backend that logs request ids would.
export default {
  logLevel: "info",
  plugins: [
    {
      name: "failing-api",
      configureServer(server) {
        server.middlewares.use("/api/users", (req, res) => {
          res.statusCode = 500;
          res.setHeader("content-type", "application/json");
          res.end(
            JSON.stringify({
              error: "database is down",
              request_id: req.headers["x-request-id"] || null,
            }),
          );
        });
      },
    },
  ],
};
