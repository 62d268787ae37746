//! Handlers that take only the context, in nested modules, with `_`
//! patterns, a relative `crate` path and a raw identifier.

use jobworker::{HandlerError, HandlerFn, Registry};

pub mod jobs {
    use jobworker as jw;

    #[jobworker::handler(name = "tick", timeout = "500ms", max_attempts = 1)]
    pub async fn tick(_: jobworker::JobContext) -> Result<(), jobworker::HandlerError> {
        Ok(())
    }

    pub mod nested {
        #[jobworker::handler(queue = "maintenance", crate = jobworker)]
        pub(crate) fn r#type(
            cx: jobworker::handler::JobContext,
        ) -> jobworker::Result<(), jobworker::HandlerError> {
            let _ = cx.attempt();
            Ok(())
        }
    }

    #[jobworker::handler(name = "via-alias", crate = self::jw)]
    fn via_alias(_cx: jw::JobContext) -> Result<(), jw::HandlerError> {
        Ok(())
    }
}

// A `cfg` on the function covers the generated module and registration too.
#[jobworker::handler]
#[cfg(any())]
async fn disabled(_cx: jobworker::JobContext) -> Result<(), HandlerError> {
    Ok(())
}

#[jobworker::handler]
#[cfg(all())]
async fn enabled(_cx: jobworker::JobContext) -> Result<(), HandlerError> {
    Ok(())
}

fn _uses_handler_error(_: HandlerError) {}

fn main() {
    let registry = Registry::load().unwrap();
    let tick = registry.get("tick").expect("tick is registered");
    assert_eq!(tick.queue, "default");
    assert_eq!(tick.timeout, Some(std::time::Duration::from_millis(500)));
    assert_eq!(tick.max_attempts, Some(1));
    assert!(matches!(tick.run, HandlerFn::Async(_)));

    let ty = registry.get("type").expect("raw identifiers lose their `r#`");
    assert_eq!(ty.queue, "maintenance");
    assert!(matches!(ty.run, HandlerFn::Blocking(_)));
    assert!(registry.get("via-alias").is_some());
    assert!(registry.get("disabled").is_none());
    assert!(registry.get("enabled").is_some());
    assert_eq!(enabled::NAME, "enabled");

    let job = jobs::tick::job(&()).unwrap();
    assert_eq!(job.name, "tick");
    assert_eq!(job.max_attempts, 1);
    assert_eq!(job.args, jobworker::__private::rmpv::Value::Nil);
    assert_eq!(jobs::nested::r#type::NAME, "type");
    assert_eq!(jobs::nested::r#type::QUEUE, "maintenance");
}
