//! `infscale activator`: the HTTP proxy that holds requests while a model has no ready replica.
//!
//! [`routes`] maps a request to its upstream (every name of a model's Service); [`table`] holds
//! the routes in use as they change, from the routes file ([`reload`]) and from the models
//! learned from `serve`'s slices ([`learn`]), each model placed by a port of its own
//! ([`ports`]); [`hold`] keeps each route's readiness, its FIFO of held requests and its counts;
//! [`readiness`] learns when an upstream is ready (EndpointSlices, or a health probe); [`proxy`]
//! holds and forwards; [`admin`] serves the counts the scaler reads (`/queue`, `/queue/watch`),
//! the routes (`/routes`) and [`telemetry`] the activator's own `/metrics`; [`server`]
//! assembles them with a graceful shutdown. [`limits`] holds every operational bound, passed
//! down from the server; [`budget`] enforces the ones on client bodies, and the listener every
//! port accepts through ([`crate::edge::listener`]) the ones on client connections.

pub(crate) mod admin;
pub(crate) mod budget;
pub(crate) mod conn_watch;
pub(crate) mod hold;
pub mod learn;
pub mod limits;
pub(crate) mod ports;
pub(crate) mod preface;
pub mod proxy;
pub(crate) mod pump;
pub(crate) mod readiness;
pub mod reload;
pub mod routes;
pub mod server;
pub(crate) mod table;
pub(crate) mod telemetry;
pub(crate) mod unsent;
pub(crate) mod written;
