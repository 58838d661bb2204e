//! The end of a TLS connection, as the client reads it.
//!
//! A response whose body has neither `Content-Length` nor chunking ends
//! when the connection does. Over TLS only the server's `close_notify`
//! alert says that it ended the body; a TCP close or reset without one is
//! what anyone on the path can forge, to cut the body anywhere. ureq reads
//! both as the end of such a body. [`CloseChecked`] (the last link of the
//! client's chain) turns a TLS connection's end without `close_notify`
//! into an error, so a cut https body fails the fetch instead of being
//! answered as whole (RFC 9112, 9.8). A body with a length or chunking is
//! read to its stated end first, so only a cut one meets the error.

use std::io;

use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};

/// The connector that wraps every connection in [`Checked`].
#[derive(Debug)]
pub(crate) struct CloseChecked;

impl<In: Transport> Connector<In> for CloseChecked {
    type Out = Checked<In>;

    fn connect(
        &self,
        _details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        Ok(chained.map(|inner| Checked {
            inner,
            answered: false,
        }))
    }
}

/// A connection whose TLS end without `close_notify`, once the answer to
/// the last request has begun, is an error. An end before any of the
/// answer (a kept-alive connection the server closed meanwhile) is left as
/// the client reports it: nothing was cut.
#[derive(Debug)]
pub(crate) struct Checked<T> {
    inner: T,
    /// Input has arrived since the last request was sent.
    answered: bool,
}

/// The message of a TLS connection ended without `close_notify`.
pub(crate) const CUT: &str = "the TLS connection ended without the server's close_notify, so \
                              what was read may be cut short (by anyone on the path)";

impl<T: Transport> Transport for Checked<T> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.answered = false;
        self.inner.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        match self.inner.await_input(timeout) {
            Err(ureq::Error::Io(e))
                if self.answered
                    && self.inner.is_tls()
                    && matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                    ) =>
            {
                Err(io::Error::new(io::ErrorKind::InvalidData, CUT).into())
            }
            Ok(progress) => {
                self.answered |= progress;
                Ok(progress)
            }
            other => other,
        }
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}
