//! What a test does with the page: navigate, read, click, type, submit.

use fantoccini::Locator;

use super::Browser;

/// A form's submit buttons (a `<button>` without a type submits).
const SUBMIT_BUTTONS: &str = "button:not([type]), button[type=submit], input[type=submit]";

impl Browser {
    /// Loads `url` (returns once the page has loaded).
    pub async fn goto(&self, url: &str) {
        if let Err(e) = self.client().goto(url).await {
            panic!("cannot load {url}: {e}");
        }
    }

    /// The URL of the current page.
    pub async fn current_url(&self) -> String {
        match self.client().current_url().await {
            Ok(url) => url.to_string(),
            Err(e) => panic!("cannot read the current URL: {e}"),
        }
    }

    /// The HTML of the current page (the DOM as it is now, serialized).
    pub async fn page_source(&self) -> String {
        match self.client().source().await {
            Ok(html) => html,
            Err(e) => panic!("cannot read the page source: {e}"),
        }
    }

    /// Waits until an element matches the CSS selector `css`.
    pub async fn wait_for(&self, css: &str) {
        self.poll(&format!("wait for {css}"), async |c| {
            Ok(Some(c.find(Locator::Css(css)).await?))
        })
        .await;
    }

    /// The visible text of the first element matching `css`, once there is
    /// one.
    pub async fn text(&self, css: &str) -> String {
        self.poll(&format!("read the text of {css}"), async |c| {
            Ok(Some(c.find(Locator::Css(css)).await?.text().await?))
        })
        .await
    }

    /// Waits until the text of the first element matching `css` contains
    /// `needle`; returns that text. Panics with the page's text when it
    /// does not within [`WAIT`](super::WAIT).
    pub async fn wait_for_text(&self, css: &str, needle: &str) -> String {
        self.poll(&format!("wait for {needle:?} in {css}"), async |c| {
            let text = c.find(Locator::Css(css)).await?.text().await?;
            Ok(text.contains(needle).then_some(text))
        })
        .await
    }

    /// Waits until the current URL contains `needle`; returns the URL.
    pub async fn wait_for_url(&self, needle: &str) -> String {
        self.poll(&format!("wait for a URL with {needle:?}"), async |c| {
            let url = c.current_url().await?.to_string();
            Ok(url.contains(needle).then_some(url))
        })
        .await
    }

    /// Clicks the first element matching `css` once it is there and
    /// clickable. Does not wait for a navigation it starts.
    pub async fn click(&self, css: &str) {
        self.poll(&format!("click {css}"), async |c| {
            c.find(Locator::Css(css)).await?.click().await?;
            Ok(Some(()))
        })
        .await
    }

    /// Replaces the value of the input matching `css` by typing `value`
    /// (clear, then key presses); retries until the field holds `value`.
    pub async fn fill(&self, css: &str, value: &str) {
        self.poll(&format!("fill {css} with {value:?}"), async |c| {
            let field = c.find(Locator::Css(css)).await?;
            field.clear().await?;
            field.send_keys(value).await?;
            Ok((field.prop("value").await?.as_deref() == Some(value)).then_some(()))
        })
        .await
    }

    /// Chooses the option whose value is `value` in the `<select>` matching
    /// `css`; retries until the select holds it.
    pub async fn select_by_value(&self, css: &str, value: &str) {
        self.poll(&format!("select {value:?} in {css}"), async |c| {
            let select = c.find(Locator::Css(css)).await?;
            select.select_by_value(value).await?;
            Ok((select.prop("value").await?.as_deref() == Some(value)).then_some(()))
        })
        .await
    }

    /// Submits the form matching `form_css` by clicking its first submit
    /// button (or, when it has none, by calling its `submit()`). Does not
    /// wait for the next page.
    pub async fn submit(&self, form_css: &str) {
        self.poll(&format!("submit {form_css}"), async |c| {
            let form = c.find(Locator::Css(form_css)).await?;
            match form.find_all(Locator::Css(SUBMIT_BUTTONS)).await?.first() {
                Some(button) => button.click().await?,
                None => c.form(Locator::Css(form_css)).await?.submit_direct().await?,
            }
            Ok(Some(()))
        })
        .await
    }

    /// Waits for a JavaScript `confirm()` (or `alert()`) dialog, accepts it
    /// and returns its message.
    pub async fn accept_js_confirm(&self) -> String {
        self.poll("accept a JavaScript dialog", async |c| {
            let message = c.get_alert_text().await?;
            c.accept_alert().await?;
            Ok(Some(message))
        })
        .await
    }
}
